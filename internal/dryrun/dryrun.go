// Package dryrun keeps, in dry-run mode (--dry-run, or a ReloadPolicy's
// dryRun), the record watcher would have written on each workload it
// decided on, in memory: decisions are made against it as against the
// workload's own record, so that dry-run behaves as watcher would, writes
// aside.
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
//
// The controller decides and announces; this package only remembers.
package dryrun

import (
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Memory holds the records watcher would have written, per workload. Its
// methods may be called from several workers at once.
type Memory struct {
	mu      sync.Mutex
	records map[workload.Key]plan.Record
}

// New returns an empty Memory.
func New() *Memory { return &Memory{records: map[workload.Key]plan.Record{}} }

// Record returns the record watcher would have written on obj, and whether
// there is one in memory (a nil Record: it would have removed it). A nil
// Memory holds nothing.
func (d *Memory) Record(obj client.Object) (plan.Record, bool) {
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

// Set keeps r as the record of key, and tells whether it was kept already:
// two decisions made at once on one workload (its change and an event of
// its own, in two workers) both decided from the record before either kept
// it, and only the first may be announced.
func (d *Memory) Set(key workload.Key, r plan.Record) (kept bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	old, ok := d.records[key]
	d.records[key] = r
	return ok && old != nil && r != nil && old.RestartID() == r.RestartID()
}

// Drop forgets a deleted workload. A nil Memory holds nothing.
func (d *Memory) Drop(key workload.Key) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.records, key)
}
