package controller

import (
	"context"
	"sync"

	"k8s.io/client-go/util/workqueue"

	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/refs"
)

// producerWakes is the source of the workloads to look at again because
// a producer of a source they read (package producer) made progress or
// failed: their restart may wait for it (guard.Producing). Nothing is
// added before the controller starts (on a standby): it reconciles every
// workload when it starts, so no wake is lost and none piles up.
type producerWakes struct {
	mu sync.Mutex
	q  workqueue.TypedRateLimitingInterface[Request] // nil until started
}

// Start implements source.TypedSource.
func (p *producerWakes) Start(_ context.Context, q workqueue.TypedRateLimitingInterface[Request]) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.q = q
	return nil
}

// Produced enqueues the workloads that read src, found through the
// store's index (package producer's Options.Enqueue).
func (r *Reconciler) Produced(_ context.Context, src object.Ref) {
	p := &r.producerWakes
	p.mu.Lock()
	q := p.q
	p.mu.Unlock()
	if q == nil {
		return
	}
	keys, err := r.Store.UsersOf(refs.Kind(src.Kind), src.Namespace, src.Name)
	if err != nil {
		metrics.Errors.WithLabelValues("index").Inc()
		return
	}
	for _, k := range keys {
		q.Add(Workload{k})
	}
}
