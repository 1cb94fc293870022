package producer

import (
	"context"
	"sync"

	"k8s.io/client-go/util/workqueue"

	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/object"
)

// Wakes is the source (a source.TypedSource of the controller) of the
// workloads to look at again because a producer of a source they read
// made progress or failed (Options.Enqueue): their restart may wait for
// it (guard.Producing). Nothing is added before the controller starts (on
// a standby): it reconciles every workload when it starts, so no wake is
// lost and none piles up. R is the controller's request.
type Wakes[R comparable] struct {
	// Users returns the requests of the workloads that read src.
	Users func(src object.Ref) ([]R, error)

	mu sync.Mutex
	q  workqueue.TypedRateLimitingInterface[R] // nil until started
}

// Start implements source.TypedSource.
func (w *Wakes[R]) Start(_ context.Context, q workqueue.TypedRateLimitingInterface[R]) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.q = q
	return nil
}

// Enqueue enqueues the users of src, once started; an error of Users is
// counted (watcher_errors_total{operation="index"}) and enqueues
// nothing.
func (w *Wakes[R]) Enqueue(_ context.Context, src object.Ref) {
	w.mu.Lock()
	q := w.q
	w.mu.Unlock()
	if q == nil {
		return
	}
	users, err := w.Users(src)
	if err != nil {
		metrics.Errors.WithLabelValues("index").Inc()
		return
	}
	for _, u := range users {
		q.Add(u)
	}
}
