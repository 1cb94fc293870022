package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/watcher-dev/watcher/internal/cluster"
)

const (
	// readyPoll is how often the controller's readiness URL is polled. It
	// bounds how much later than the truth start-to-ready is measured.
	readyPoll = 50 * time.Millisecond
	// stopGrace is how long the controller has to exit after SIGTERM.
	stopGrace = 5 * time.Second
)

// controllerProcess is the controller under test: a cluster.Process (its
// own process group, output in a log file) plus the time it was started and
// a stop that acts only once.
type controllerProcess struct {
	proc    cluster.Process
	started time.Time
	stopped sync.Once
}

// startController runs argv with the extra environment variables env,
// its stdout and stderr going to logPath, which it empties first.
func startController(argv, env []string, logPath string) (*controllerProcess, error) {
	if len(argv) == 0 {
		return nil, errors.New("start controller: empty command")
	}
	// cluster.Process appends; a rerun into the same --out folder should
	// not find the last run's log in front of its own.
	if err := os.WriteFile(logPath, nil, 0o644); err != nil {
		return nil, fmt.Errorf("create controller log: %w", err)
	}
	p := &controllerProcess{proc: cluster.Process{
		Name:      "controller",
		Path:      argv[0],
		Args:      argv[1:],
		Env:       env,
		LogPath:   logPath,
		ReadyPoll: readyPoll,
	}}
	p.started = time.Now()
	if err := p.proc.Start(); err != nil {
		return nil, fmt.Errorf("start controller: %w", err)
	}
	return p, nil
}

// pid returns the controller's process id.
func (p *controllerProcess) pid() int { return p.proc.Pid() }

// waitReady polls url every readyPoll until it answers 200 and returns the
// time from start to then. It fails if the controller exits, after
// timeout, or when ctx ends.
func (p *controllerProcess) waitReady(ctx context.Context, url string, timeout time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	defer client.CloseIdleConnections()
	var last error
	err := p.proc.WaitReady(ctx, timeout, func(ctx context.Context) error {
		last = getOK(ctx, client, url)
		return last
	})
	if err == nil {
		return time.Since(p.started), nil
	}
	// WaitReady fails only when the controller exits or when ctx ends (its
	// deadline may have passed a moment before ctx.Done is closed).
	if err := p.running(); err != nil {
		return 0, err
	}
	<-ctx.Done()
	return 0, fmt.Errorf("controller not ready after %s: %w (last: %v); see %s", timeout, ctx.Err(), last, p.proc.LogPath)
}

// getOK GETs url and wants 200 OK.
func getOK(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// running returns an error if the controller has exited.
func (p *controllerProcess) running() error {
	select {
	case <-p.proc.Exited():
		return p.exitError()
	default:
		return nil
	}
}

// exitError describes how the controller ended, with the end of its log.
// Call it only after the controller has exited.
func (p *controllerProcess) exitError() error {
	return fmt.Errorf("controller exited (%v); %s ends:\n%s", p.proc.Err(), p.proc.LogPath, p.proc.LogTail())
}

// stop sends SIGTERM to the controller's process group, then SIGKILL
// after stopGrace, and waits until it has exited. Only the first call does
// anything.
func (p *controllerProcess) stop() {
	p.stopped.Do(func() { p.proc.Stop(stopGrace) })
}
