package guard

import (
	"cmp"
	"fmt"
	"github.com/watcher-dev/watcher/internal/object"
	"slices"
	"sync"
	"time"
)

// Rollouts tracks the rollouts watcher started and schedules restarts in
// waves: a restart starts only while fewer than Max rollouts are in
// progress (Max 0: no limit), in order of priority, then namespace and
// name. A rollout in progress for longer than Timeout has failed: it no
// longer counts against Max, and, with HoldOnFailure, the restarts caused
// by the same change (same source, same content) are held (FailedGate)
// until it finishes or a person releases them.
//
//	event                                       effect
//	Check, a slot free and no waiter ahead      admit and reserve the slot
//	Check, otherwise                            hold (wave), wait in order
//	Commit (restart written)                    in progress, clock starts
//	Cancel (not written)                        the slot is free again
//	Seen rolling, not tracked                   in progress (found in the
//	                                            cluster: a restart of
//	                                            watcher, a handover)
//	Seen done, in progress                      finished (Finished), unless
//	                                            seen at a generation older
//	                                            than the restart's (Wrote)
//	Seen done, failed                           recovered: holds lifted
//	Sweep, in progress longer than Timeout      failed (Failure)
//	Gone (workload deleted)                     forgotten
//
// What is in progress is rebuilt from the cluster (Seen), so it survives a
// restart of watcher; the order of waiters is in memory, and rebuilt as the
// held workloads are decided again.
type Rollouts struct {
	Max           int
	Timeout       time.Duration
	HoldOnFailure bool

	mu      sync.Mutex
	running map[object.Ref]*rollout
	failed  map[object.Ref]*rollout
	waiting map[object.Ref]waiter
}

type rollout struct {
	kind    string
	start   time.Time
	sources []Source
	// here: started by this replica (not found in the cluster).
	here bool
	// generation is the workload's generation the restart wrote: an
	// older state of the workload says nothing about this rollout.
	generation int64
	// reserved: admitted, not yet written; fresh: the reservation made
	// the entry (else it reserves the workload's own rollout in progress).
	reserved, fresh bool
}

type waiter struct {
	priority int
	key      object.Ref
}

// NewRollouts returns a tracker and wave scheduler.
func NewRollouts(max int, timeout time.Duration, holdOnFailure bool) *Rollouts {
	return &Rollouts{Max: max, Timeout: timeout, HoldOnFailure: holdOnFailure,
		running: map[object.Ref]*rollout{}, failed: map[object.Ref]*rollout{}, waiting: map[object.Ref]waiter{}}
}

// Check implements Gate: the wave.
func (w *Rollouts) Check(r Request) Verdict {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.running[r.Workload]; ok || w.Max <= 0 {
		// Its own rollout is still going: the next one replaces it, and
		// takes no other slot.
		delete(w.waiting, r.Workload)
		w.reserve(r)
		return Verdict{}
	}
	me := waiter{priority: r.Priority, key: r.Workload}
	w.waiting[r.Workload] = me
	ahead := 0
	for _, o := range w.waiting {
		if before(o, me) {
			ahead++
		}
	}
	free := w.Max - len(w.running)
	if ahead < free {
		delete(w.waiting, r.Workload)
		w.reserve(r)
		return Verdict{}
	}
	return Verdict{Hold: true, Reason: ReasonWave,
		Message: fmt.Sprintf("waiting for a rollout slot: %d of %d rollouts in progress, %d restarts ahead", len(w.running), w.Max, ahead)}
}

func (w *Rollouts) reserve(r Request) {
	if old, ok := w.running[r.Workload]; ok {
		old.reserved = true
		return
	}
	w.running[r.Workload] = &rollout{kind: r.Workload.Kind, start: r.Now, sources: r.Sources, here: true, reserved: true, fresh: true}
}

// before orders waiters: lower priority first, then namespace, name, key.
func before(a, b waiter) bool {
	return cmp.Or(cmp.Compare(a.priority, b.priority), object.Compare(a.key, b.key)) < 0
}

// Commit implements Committer: the rollout is in progress from now.
func (w *Rollouts) Commit(r Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	gen := int64(0)
	if old, ok := w.running[r.Workload]; ok {
		gen = old.generation
	}
	w.running[r.Workload] = &rollout{kind: r.Workload.Kind, start: r.Now, sources: r.Sources, here: true, generation: gen}
	delete(w.failed, r.Workload)
}

// Cancel implements Canceller: a reserved slot is free again, and a
// restart held by another gate does not wait in the wave.
func (w *Rollouts) Cancel(r Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.waiting, r.Workload)
	if ro, ok := w.running[r.Workload]; ok && ro.reserved {
		if ro.fresh {
			delete(w.running, r.Workload)
		} else {
			ro.reserved = false
		}
	}
}

// Finished is a rollout that reached its kind's notion of done.
type Finished struct {
	Kind string
	// Duration is from the restart to done; zero for a rollout found in
	// the cluster (its start is not known).
	Duration time.Duration
	// Recovered: it had failed (timed out) before.
	Recovered bool
}

// Wrote records the generation of the workload that the restart of key
// wrote, before Commit, so that a state of the workload seen from
// before the write is not taken for the end of its rollout.
func (w *Rollouts) Wrote(key object.Ref, generation int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ro, ok := w.running[key]; ok {
		ro.generation = generation
	}
}

// Seen records the state of a workload restarted by watcher, at
// generation, as the cluster shows it: rolling or done. It returns the
// rollout that finished with it, if one did.
func (w *Rollouts) Seen(key object.Ref, rolling bool, generation int64, now time.Time, sources []Source) (Finished, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ro, running := w.running[key]
	f, failed := w.failed[key]
	switch {
	case rolling && !running && !failed:
		w.running[key] = &rollout{kind: key.Kind, start: now, sources: sources, generation: generation}
	case !rolling && running && !ro.reserved && generation >= ro.generation:
		delete(w.running, key)
		out := Finished{Kind: ro.kind}
		if ro.here {
			out.Duration = now.Sub(ro.start)
		}
		return out, true
	case !rolling && failed:
		delete(w.failed, key)
		return Finished{Kind: f.kind, Recovered: true}, true
	}
	return Finished{}, false
}

// Failure is a rollout that did not finish within Timeout.
type Failure struct {
	Key     object.Ref
	Sources []Source
	// Here: started by this replica.
	Here bool
}

// Sweep fails the rollouts in progress for longer than Timeout.
func (w *Rollouts) Sweep(now time.Time) []Failure {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Failure
	for key, ro := range w.running {
		if ro.reserved || w.Timeout <= 0 || now.Sub(ro.start) < w.Timeout {
			continue
		}
		delete(w.running, key)
		w.failed[key] = ro
		out = append(out, Failure{Key: key, Sources: ro.sources, Here: ro.here})
	}
	slices.SortFunc(out, func(a, b Failure) int { return object.Compare(a.Key, b.Key) })
	return out
}

// FailedGate returns the gate that holds the restarts caused by the change
// of a failed rollout.
func (w *Rollouts) FailedGate() Gate { return failedGate{w} }

type failedGate struct{ w *Rollouts }

// Check implements Gate.
func (g failedGate) Check(r Request) Verdict {
	w := g.w
	if !w.HoldOnFailure || r.Released {
		return Verdict{}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := make([]object.Ref, 0, len(w.failed))
	for k := range w.failed {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, object.Compare)
	for _, k := range keys {
		if k == r.Workload {
			continue
		}
		for _, s := range w.failed[k].sources {
			if slices.Contains(r.Sources, s) {
				return Verdict{Hold: true, Reason: ReasonFailedRollout,
					Message: fmt.Sprintf("the rollout of %s, restarted for the same change of %s, did not finish within %s; "+
						"held until it does, or until %s is set to a new value on either", k, s.Object, short(w.Timeout), ReleaseAnnotation)}
			}
		}
	}
	return Verdict{}
}

// Release forgets the failure of key's rollout (a person released it, or
// the workload is gone), so that the restarts it held go on.
func (w *Rollouts) Release(key object.Ref) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.failed[key]
	delete(w.failed, key)
	return ok
}

// ReleaseSource forgets the failures of rollouts caused by a change of the
// source id. It returns how many.
func (w *Rollouts) ReleaseSource(id object.Ref) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for k, ro := range w.failed {
		if slices.ContainsFunc(ro.sources, func(s Source) bool { return s.Object == id }) {
			delete(w.failed, k)
			n++
		}
	}
	return n
}

// Forget takes key out of the wave: it no longer waits for a restart.
func (w *Rollouts) Forget(key object.Ref) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.waiting, key)
}

// Gone forgets everything about key: the workload was deleted.
func (w *Rollouts) Gone(key object.Ref) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.waiting, key)
	delete(w.running, key)
	delete(w.failed, key)
}

// Next returns the waiters that may start now, in order: as many as there
// are free slots (all of them when Max is 0).
func (w *Rollouts) Next() []object.Ref {
	w.mu.Lock()
	defer w.mu.Unlock()
	ws := make([]waiter, 0, len(w.waiting))
	for _, x := range w.waiting {
		ws = append(ws, x)
	}
	slices.SortFunc(ws, func(a, b waiter) int {
		if before(a, b) {
			return -1
		}
		return 1
	})
	n := len(ws)
	if w.Max > 0 {
		n = min(n, max(w.Max-len(w.running), 0))
	}
	out := make([]object.Ref, 0, n)
	for _, x := range ws[:n] {
		out = append(out, x.key)
	}
	return out
}

// InProgress returns how many rollouts are in progress (reserved slots
// included), and how many have failed and are not released.
func (w *Rollouts) InProgress() (running, failed int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.running), len(w.failed)
}

// short formats d without trailing zero units: 10m, 1h30m, 90s.
func short(d time.Duration) string {
	s := d.String()
	for _, z := range []string{"m0s", "h0m"} {
		if len(s) > len(z) && s[len(s)-len(z):] == z {
			s = s[:len(s)-len(z)+1]
		}
	}
	return s
}
