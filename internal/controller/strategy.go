package controller

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/policy"
	"github.com/watcher-dev/watcher/internal/restart"
)

// strategyOf returns the restart strategy of obj, a workload the
// ReloadPolicies a apply to: the one its restart.StrategyAnnotation names,
// else the policies' (the first that sets one), else --restart-strategy.
// It is the one place that says it (gather keeps it for the walk); err
// says that the annotation names no strategy, and the default is used.
func (r *Reconciler) strategyOf(obj client.Object, a policy.Applied) (restart.Strategy, error) {
	def := r.Config.Strategy
	if s, ok := restart.ByName(a.Strategy); ok {
		def = s
	}
	return restart.For(obj, def)
}

// strategy returns s, the strategy of obj, reporting err, an unknown one
// on the workload: whenever the workload is handled, like a malformed
// opt-out, it never blocks it.
func (r *Reconciler) strategy(ctx context.Context, obj client.Object, s restart.Strategy, err error) restart.Strategy {
	if err != nil {
		r.invalidAnnotation(ctx, obj, err)
	}
	return s
}
