package main

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// progress writes progress lines, each with the time since the run began,
// so that a long phase is never silent.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	began time.Time
}

func newProgress(w io.Writer) *progress {
	return &progress{w: w, began: time.Now()}
}

// printf writes one line.
func (p *progress) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "bench: [%6.1fs] %s\n", time.Since(p.began).Seconds(), fmt.Sprintf(format, args...))
}

// every writes line() every period until stop is called.
func (p *progress) every(period time.Duration, line func() string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				p.printf("%s", line())
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
