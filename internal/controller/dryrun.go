package controller

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/dryrun"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/workload"
)

// dryApply carries out p, decided for obj, in memory only, in d: see
// package dryrun.
func (r *Reconciler) dryApply(ctx context.Context, d *dryrun.Memory, key workload.Key, obj client.Object, p plan.Plan) {
	log := ctrl.LoggerFrom(ctx)
	kept := d.Set(key, p.Record) // nil for Forget
	if p.Action == plan.Restart && kept {
		return // announced by the decision that kept it
	}
	if p.Action != plan.Restart {
		log.V(1).Info("Dry run: would write the record, restarting nothing", "action", p.Action.String())
		return
	}
	said := r.cause(key, p.Changes)
	said.OnDelete, said.DryRun = workload.OnDelete(obj), true
	r.announce(ctx, obj, said, p.Record.RestartID(), "")
}
