package controller

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/hold"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/workload"
)

// gate asks the guards before a restart of key by p, unless p restarts
// nothing (then any hold of key ends) or the workload's pods roll only
// when deleted (onDelete: no rollout to guard). gated says whether Done
// must be called after the write; ok whether to write.
func (r *Reconciler) gate(ctx context.Context, key workload.Key, obj client.Object, p plan.Plan, onDelete string, facts hold.Facts) (req guard.Request, gated, ok bool) {
	if p.Action != plan.Restart || onDelete != "" {
		r.guards.Settled(ctx, key)
		return guard.Request{}, false, true
	}
	req, ok = r.guards.Admit(ctx, key, obj, p, facts, func(err error) { r.invalidAnnotation(ctx, obj, err) })
	return req, true, ok
}

// cached returns the workload key as the store holds it; nil if none.
func (r *Reconciler) cached(key workload.Key) client.Object {
	if o, err := r.Store.Get(key.Kind, key.Namespace, key.Name); err == nil && o != nil {
		return o
	}
	return nil
}
