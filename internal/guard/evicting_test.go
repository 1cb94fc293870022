package guard_test

import (
	"testing"
	"time"

	"github.com/watcher-dev/watcher/internal/guard"
)

// TestSeenEvicting: one row per line of SeenEvicting's table, and a
// blocked eviction failing at the timeout, holding the rest of its change,
// then recovering.
func TestSeenEvicting(t *testing.T) {
	src := guard.Source{Object: obj(cfg), Sum: "v1"}
	st := guard.State{At: at(0), Generation: 3, Sources: []guard.Source{src}}
	running := func(w *guard.Rollouts) int { n, _ := w.InProgress(); return n }

	// Restarted here: timed from the write, finished when the pods are.
	w := guard.NewRollouts(1, time.Minute, true)
	r := req("a/a", at(0), src)
	w.Check(r)
	w.Commit(r)
	if _, ok := w.SeenEvicting(r.Workload, st, true, at(time.Second)); ok || running(w) != 1 {
		t.Fatalf("rolling: finished, or %d in progress", running(w))
	}
	f, ok := w.SeenEvicting(r.Workload, st, false, at(9*time.Second))
	if !ok || f.Duration != 9*time.Second || f.Recovered || running(w) != 0 {
		t.Errorf("done: %+v, %v, %d in progress", f, ok, running(w))
	}
	if _, ok := w.SeenEvicting(r.Workload, st, false, at(10*time.Second)); ok {
		t.Error("done twice")
	}

	// Found rolling (a restart of watcher): in progress, untimed.
	w = guard.NewRollouts(1, time.Minute, true)
	k := dep("a/b")
	w.SeenEvicting(k, st, true, at(10*time.Second))
	if running(w) != 1 {
		t.Fatalf("found rolling: %d in progress", running(w))
	}
	if f, ok := w.SeenEvicting(k, st, false, at(20*time.Second)); !ok || f.Duration != 0 {
		t.Errorf("found, done: %+v, %v", f, ok)
	}

	// Found rolling past the timeout: failed at once, quietly.
	w = guard.NewRollouts(1, time.Minute, true)
	w.SeenEvicting(k, st, true, at(2*time.Minute))
	if running(w) != 0 {
		t.Errorf("found past its timeout: %d in progress", running(w))
	}
	if f, ok := w.SeenEvicting(k, st, false, at(3*time.Minute)); !ok || !f.Recovered || !f.Quiet {
		t.Errorf("found failed, done: %+v, %v", f, ok)
	}

	// Blocked: failed by the sweep at the timeout, the rest of its change
	// held, released when its pods are replaced after all.
	w = guard.NewRollouts(0, time.Minute, true)
	r = req("a/c", at(0), src)
	w.Check(r)
	w.Commit(r)
	w.SeenEvicting(r.Workload, st, true, at(30*time.Second))
	failures, _ := w.Sweep(at(time.Minute))
	if len(failures) != 1 || failures[0].Key != r.Workload {
		t.Fatalf("sweep: %v", failures)
	}
	other := req("a/d", at(time.Minute), src)
	if v := (guard.Chain{w.FailedGate()}).Check(other); v.Reason != guard.ReasonFailedRollout {
		t.Errorf("the rest of the change: %+v", v)
	}
	w.SeenEvicting(r.Workload, st, true, at(90*time.Second)) // still blocked: stays failed
	if f, ok := w.SeenEvicting(r.Workload, st, false, at(2*time.Minute)); !ok || !f.Recovered || f.Quiet {
		t.Errorf("unblocked: %+v, %v", f, ok)
	}
	if v := (guard.Chain{w.FailedGate()}).Check(other); v.Reason != "" {
		t.Errorf("after recovery the rest of the change is held: %+v", v)
	}
}
