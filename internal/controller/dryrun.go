package controller

import (
	"context"
	"sync"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/workload"
)

// dryRun holds, in dry-run mode (--dry-run), the record watcher would have
// written on each workload it decided on, in memory: decisions are made
// against it as against the workload's own record, so that dry-run behaves
// as watcher would, writes aside.
//
//	the decision    in dry-run
//	adopt, refresh  the record is kept in memory; logged (debug), no Event
//	forget          "no record" is kept in memory; logged (debug)
//	restart         the new record is kept in memory; logged, an Event
//	                WouldRestart on the workload, watcher_would_restart_total
//	                (or, for a workload whose pods roll only when deleted,
//	                the Event and watcher_skipped_changes_total{on-delete})
//
// Keeping the record is what says each restart once: the next decision
// compares with the configuration the restart would have recorded, so the
// same configuration is never announced twice, and the next change is
// announced once. A workload that never had a record is adopted in memory,
// with no restart, as watcher would adopt it; its next change is a would-be
// restart. The memory is lost when watcher stops: after a start, workloads
// are adopted in memory again, and a record on a workload that differs
// from its configuration is announced again, once.
type dryRun struct {
	mu      sync.Mutex
	records map[workload.Key]plan.Record
}

func newDryRun() *dryRun { return &dryRun{records: map[workload.Key]plan.Record{}} }

// record returns the record watcher would have written on obj, and whether
// there is one in memory (a nil Record: it would have removed it). A nil
// dryRun holds nothing.
func (d *dryRun) record(obj client.Object) (plan.Record, bool) {
	if d == nil {
		return nil, false
	}
	kind, ok := workload.Of(obj)
	if !ok {
		return nil, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.records[workload.Key{Kind: kind.Name(), Namespace: obj.GetNamespace(), Name: obj.GetName()}]
	return r, ok
}

// set keeps r as the record of key, and tells whether it was kept already:
// two decisions made at once on one workload (its change and an event of
// its own, in two workers) both decided from the record before either kept
// it, and only the first may be announced.
func (d *dryRun) set(key workload.Key, r plan.Record) (kept bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	old, ok := d.records[key]
	d.records[key] = r
	return ok && old != nil && r != nil && old.RestartID() == r.RestartID()
}

// drop forgets a deleted workload.
func (d *dryRun) drop(key workload.Key) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.records, key)
}

// dryApply carries out p, decided for obj, in memory only, in d: see
// dryRun.
func (r *Reconciler) dryApply(ctx context.Context, d *dryRun, key workload.Key, obj client.Object, p plan.Plan) {
	log := ctrl.LoggerFrom(ctx)
	kept := d.set(key, p.Record) // nil for Forget
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
