package controller

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/workload"
)

// write sends what p decided for obj: one patch, or, for the restart of a
// kind whose template cannot be changed (a Job), its re-creation
// (restart.Recreator.Recreate). It returns the workload as the write left
// it: the new Job after a re-creation.
func (r *Reconciler) write(ctx context.Context, w *gathered, obj client.Object, p plan.Plan, s restart.Strategy, req guard.Request) (client.Object, error) {
	key := w.key
	kind, _ := workload.ByName(key.Kind)
	if p.Action == plan.Restart && kind.Recreate {
		if r.recreations == nil {
			return obj, reconcile.TerminalError(fmt.Errorf("re-create %s: job re-creation not set up", key))
		}
		pt, patch := restart.PatchFor(obj, p, r.Config.Hasher.ID(), workload.Job, s, "")
		return r.recreations.Recreate(ctx, obj, pt, patch, []byte(r.guards.State(req, &batchv1.Job{})))
	}
	patchType, patch := restart.PatchFor(obj, p, r.Config.Hasher.ID(), kind, s, r.guards.State(req, obj))
	if w.outcome.WritePins {
		pins, err := r.pinsFor(ctx, w, obj, w.outcome) // pin.go
		if err != nil {
			return obj, err
		}
		if patch, err = restart.WithPins(patch, kind, pins, pins.Sign(key.Namespace, r.pinSign()), w.outcome.Wanted); err != nil {
			return obj, err
		}
	}
	if err := r.Client.Patch(ctx, obj, client.RawPatch(patchType, patch), restart.PatchOptions(s, p)...); err != nil {
		return obj, r.patchFailed(ctx, key, obj, err)
	}
	return obj, nil
}

// newRecreator returns the Job re-creator of r, keeping its records in
// cfg's namespace.
func newRecreator(r *Reconciler, cfg Config) *restart.Recreator {
	ns := cfg.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	rc := restart.NewRecreator(r.Client, r.Fresh, ns, r.Recorder)
	rc.Bind = restart.BindState(cfg.Guards.Sign)
	return rc
}
