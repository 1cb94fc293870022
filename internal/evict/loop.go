package evict

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// Loop is the source of the looks again at the restarts by eviction (a
// controller adds it to its sources, as a source.TypedSource): a walk that
// leaves a restart by eviction not done schedules its next look here, and
// a look's own follow-ups are its requeues. R is the controller's request
// (its look at one workload's eviction step).
type Loop[R comparable] struct {
	mu    sync.Mutex
	after func(R, time.Duration) // the work queue's AddAfter; nil until started
}

// Start implements source.TypedSource.
func (l *Loop[R]) Start(_ context.Context, q workqueue.TypedRateLimitingInterface[R]) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.after = func(e R, d time.Duration) { q.AddAfter(e, d) }
	return nil
}

// Schedule enqueues the look look in d; d 0: none. Nothing is enqueued
// before Start.
func (l *Loop[R]) Schedule(look R, d time.Duration) {
	l.mu.Lock()
	after := l.after
	l.mu.Unlock()
	if d > 0 && after != nil {
		after(look, d)
	}
}
