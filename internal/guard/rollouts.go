package guard

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/watcher-dev/watcher/internal/object"
)

// Rollouts tracks the rollouts watcher started and schedules restarts in
// waves: a restart starts only while fewer than Max rollouts are in
// progress (Max 0: no limit). A rollout in progress for longer than
// Timeout has failed: it no longer counts against Max, and, with
// HoldOnFailure, the restarts caused by the same change (same source, same
// content) are held (FailedGate) until it finishes or a person releases
// them.
//
// Slots are shared fairly between namespaces, since the wave is shared by
// every tenant of the cluster:
//
//   - a namespace holds at most Max-1 slots (Max >= 2), so another
//     namespace always finds one free; while other namespaces wait, at most
//     half of them, rounded up;
//   - a free slot goes to the namespace with the fewest rollouts in
//     progress, then to the restart waiting longest; the priority
//     annotation orders restarts only within their namespace;
//   - within a namespace, a slot goes to the lowest priority number among
//     the restarts waiting for one and those due to ask now: a restart
//     another gate held until a time (Defer: a change set settling, a
//     maintenance window) keeps its place from that time, for dueGrace,
//     so that restarts woken together start in priority order whichever
//     is decided first; it never makes its namespace take a slot it would
//     not have had, and one that does not ask within dueGrace (deleted,
//     no longer needed, held again) loses its place;
//   - a rollout is timed from its first restart: restarting a workload
//     again while it rolls takes no new slot and does not extend its
//     timeout.
//
// A rollout is watcher's only while the workload is at the generation
// watcher's restart wrote (State.Generation) and its StateAnnotation is
// signed by this installation for its UID: a copy or a forgery of the
// annotations is not watcher's rollout, nor is a later scale-up, drain or
// edit of the workload (another generation), nor the same generation
// unavailable again after its rollout was seen done.
//
//	event                                       effect
//	Check, a free slot is this restart's        admit and reserve the slot
//	Check, otherwise                            hold (wave), wait
//	Defer (another gate held it until t)        due at t: keeps its place in
//	                                            its namespace from t to
//	                                            t+dueGrace, or until it asks
//	Commit (restart written)                    in progress, clock starts
//	                                            (kept if already rolling)
//	Cancel (not written)                        the slot is free again
//	Seen rolling by watcher, not tracked        in progress from State.At
//	                                            (a restart of watcher, a
//	                                            handover); failed at once,
//	                                            quietly, if older than Timeout
//	Seen done or not watcher's, in progress     finished (Finished)
//	Seen done, failed                           recovered: holds lifted
//	Sweep, in progress longer than Timeout      failed (Failure)
//	Sweep, due more than dueGrace ago           forgotten: holds no place
//	Gone (workload deleted)                     forgotten
type Rollouts struct {
	Max           int
	Timeout       time.Duration
	HoldOnFailure bool
	// WaitWarn is how long a restart may wait for a slot before Sweep
	// reports it (Starved); 0: Timeout, or 10 minutes without one.
	WaitWarn time.Duration
	// Waited, when set, is told how long each restart the wave admits
	// waited for its slot (the controller's histogram).
	Waited func(time.Duration)

	mu      sync.Mutex
	running map[object.Ref]*rollout
	failed  map[object.Ref]*rollout
	waiting map[object.Ref]*waiter
	// done is the generation whose rollout was seen done, per workload:
	// that generation unavailable again is not watcher's rollout.
	done map[object.Ref]int64
}

type rollout struct {
	start   time.Time
	sources []Source
	// here: started by this replica (not found in the cluster).
	here bool
	// found: found in the cluster already past its timeout after a
	// restart of watcher: reported by the replica that saw it fail.
	found bool
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
	// since is when it asked for a slot, or, due, when it is due.
	since time.Time
	// due: another gate held it until due (Defer) and it has not asked
	// since; zero: it asks, held for the wave.
	due time.Time
	// warned: Sweep reported that it waits too long.
	warned bool
}

// dueGrace is how long a restart due to ask for a slot (Defer) keeps its
// place in its namespace before it asks: the time for its wake to reach
// a worker. It bounds how long one that never asks (deleted, no longer
// needed) delays the others.
const dueGrace = 30 * time.Second

// ready reports whether x, due, keeps its place at now.
func (x *waiter) ready(now time.Time) bool {
	return !x.due.IsZero() && !now.Before(x.due) && now.Before(x.due.Add(dueGrace))
}

// before orders the waiters of one namespace: priority, then name.
func before(a, b *waiter) int {
	return cmp.Or(cmp.Compare(a.priority, b.priority), object.Compare(a.key, b.key))
}

// NewRollouts returns a tracker and wave scheduler.
func NewRollouts(max int, timeout time.Duration, holdOnFailure bool) *Rollouts {
	return &Rollouts{Max: max, Timeout: timeout, HoldOnFailure: holdOnFailure,
		running: map[object.Ref]*rollout{}, failed: map[object.Ref]*rollout{},
		waiting: map[object.Ref]*waiter{}, done: map[object.Ref]int64{}}
}

// Check implements Gate: the wave.
func (w *Rollouts) Check(r Request) Verdict {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.running[r.Workload]; ok || w.Max <= 0 {
		// Its own rollout is still going: the next one replaces it, and
		// takes no other slot.
		w.admitted(r)
		return Verdict{}
	}
	me := w.waiting[r.Workload]
	if me == nil || !me.due.IsZero() {
		me = &waiter{key: r.Workload, since: r.Now}
		w.waiting[r.Workload] = me
	}
	me.priority = r.Priority
	order := w.order(r.Now)
	if i := slices.Index(order, me); i >= 0 && i < w.Max-len(w.running) {
		w.admitted(r)
		return Verdict{}
	}
	ahead := slices.Index(order, me)
	if ahead < 0 {
		ahead = len(order)
	}
	return Verdict{Hold: true, Reason: ReasonWave,
		Message: fmt.Sprintf("waiting for a rollout slot: %d of %d rollouts in progress (%d in namespace %s), %d restarts ahead",
			len(w.running), w.Max, w.inNamespace(r.Workload.Namespace), r.Workload.Namespace, ahead)}
}

// admitted takes r out of the wave and reserves its slot.
func (w *Rollouts) admitted(r Request) {
	if x := w.waiting[r.Workload]; x != nil {
		if w.Waited != nil && x.due.IsZero() {
			w.Waited(r.Now.Sub(x.since))
		}
		delete(w.waiting, r.Workload)
	}
	if old, ok := w.running[r.Workload]; ok {
		old.reserved = true
		return
	}
	w.running[r.Workload] = &rollout{start: r.Now, sources: r.Sources, here: true, reserved: true, fresh: true}
}

// order returns the waiters that may take the free slots at now, in the
// order they take them: one at a time, each to the namespace with the
// fewest rollouts in progress (counting the slots given in this order),
// under its share; between equal namespaces the one waiting longest.
// Only the restarts that ask choose the namespace; within it, the slot
// goes to the lowest priority, then name, of those that ask and those
// due now (ready), which may thus come first in the order without asking.
func (w *Rollouts) order(now time.Time) []*waiter {
	byNS := map[string][]*waiter{}
	due := map[string][]*waiter{}
	for _, x := range w.waiting {
		_, rolling := w.running[x.key] // takes no slot when it asks
		switch {
		case x.due.IsZero():
			byNS[x.key.Namespace] = append(byNS[x.key.Namespace], x)
		case x.ready(now) && !rolling:
			due[x.key.Namespace] = append(due[x.key.Namespace], x)
		}
	}
	for _, q := range byNS {
		slices.SortFunc(q, before)
	}
	for _, q := range due {
		slices.SortFunc(q, before)
	}
	load := map[string]int{}
	for k := range w.running {
		load[k.Namespace]++
	}
	limit := w.share(len(byNS))
	var out []*waiter
	for {
		var best string
		found := false
		for ns, q := range byNS {
			if len(q) == 0 || load[ns] >= limit {
				continue
			}
			if !found || load[ns] < load[best] || (load[ns] == load[best] &&
				(q[0].since.Before(byNS[best][0].since) || (q[0].since.Equal(byNS[best][0].since) && ns < best))) {
				best, found = ns, true
			}
		}
		if !found {
			return out
		}
		if d := due[best]; len(d) > 0 && before(d[0], byNS[best][0]) < 0 {
			out = append(out, d[0])
			due[best] = d[1:]
		} else {
			out = append(out, byNS[best][0])
			byNS[best] = byNS[best][1:]
		}
		load[best]++
	}
}

// share returns the most slots a namespace may hold: Max-1 (Max >= 2), so
// that another namespace always finds one; while other namespaces wait
// too, half of Max, rounded up.
func (w *Rollouts) share(waitingNamespaces int) int {
	switch {
	case w.Max < 2:
		return w.Max
	case waitingNamespaces > 1:
		return (w.Max + 1) / 2
	}
	return w.Max - 1
}

func (w *Rollouts) inNamespace(ns string) int {
	n := 0
	for k := range w.running {
		if k.Namespace == ns {
			n++
		}
	}
	return n
}

// Commit implements Committer: the rollout is in progress from now, or,
// if the workload was still rolling, from when that rollout started.
func (w *Rollouts) Commit(r Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ro := &rollout{start: r.Now, here: true}
	if old, ok := w.running[r.Workload]; ok {
		ro.generation = old.generation
		if !old.fresh {
			ro.start, ro.here = old.start, old.here
		}
	}
	ro.sources = r.Sources
	w.running[r.Workload] = ro
	delete(w.failed, r.Workload)
	delete(w.done, r.Workload)
}

// Cancel implements Canceller: a reserved slot is free again, and a
// restart held by another gate does not wait in the wave.
func (w *Rollouts) Cancel(r Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cancel(r)
}

// Defer implements Deferrer: as Cancel, and the restart, due to ask again
// at until, keeps its place in its namespace from then (dueGrace).
func (w *Rollouts) Defer(r Request, until time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cancel(r)
	if w.Max > 0 {
		w.waiting[r.Workload] = &waiter{key: r.Workload, priority: r.Priority, since: until, due: until}
	}
}

// cancel is Cancel, w.mu held.
func (w *Rollouts) cancel(r Request) {
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
	// Quiet: nothing to say about it (it was found failed after a restart
	// of watcher, and never reported by this replica).
	Quiet bool
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

// Observation is a workload as the cluster shows it.
type Observation struct {
	// Rolling: its rollout is not done (see Rolling).
	Rolling bool
	// Generation is its metadata.generation.
	Generation int64
	// State is its StateAnnotation, verified; nil: none to trust.
	State *State
	// Now is the time of the observation.
	Now time.Time
}

// byWatcher reports whether o shows a rollout watcher started: rolling, at
// the generation watcher's restart wrote.
func (o Observation) byWatcher() bool {
	return o.Rolling && o.State != nil && o.Generation == o.State.Generation
}

// Seen records the state of a workload as the cluster shows it. It returns
// the rollout that finished with it, if one did.
func (w *Rollouts) Seen(key object.Ref, o Observation) (Finished, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ro, running := w.running[key]
	f, failed := w.failed[key]
	doneGen, wasDone := w.done[key]
	mine := o.byWatcher() && !(wasDone && doneGen == o.Generation)
	switch {
	case mine && !running && !failed:
		ro := &rollout{start: o.State.At, sources: o.State.Sources, generation: o.State.Generation}
		if w.Timeout > 0 && o.Now.Sub(o.State.At) >= w.Timeout {
			ro.found = true
			w.failed[key] = ro
		} else {
			w.running[key] = ro
		}
	case !mine && running && !ro.reserved && o.Generation >= ro.generation:
		delete(w.running, key)
		w.finished(key, o)
		out := Finished{Kind: key.Kind}
		if ro.here {
			out.Duration = o.Now.Sub(ro.start)
		}
		return out, true
	case !mine && failed && o.Generation >= f.generation:
		delete(w.failed, key)
		w.finished(key, o)
		return Finished{Kind: key.Kind, Recovered: true, Quiet: f.found}, true
	}
	return Finished{}, false
}

// finished remembers that the generation watcher wrote rolled out.
func (w *Rollouts) finished(key object.Ref, o Observation) {
	if o.State != nil && !o.Rolling && o.Generation == o.State.Generation {
		w.done[key] = o.Generation
	}
}

// Failure is a rollout that did not finish within Timeout.
type Failure struct {
	Key     object.Ref
	Sources []Source
	// Here: started by this replica.
	Here bool
}

// Sweep fails the rollouts in progress for longer than Timeout, forgets
// the restarts due more than dueGrace ago that did not ask, and returns
// the restarts that started waiting for a slot more than WaitWarn ago
// (each once).
func (w *Rollouts) Sweep(now time.Time) (failures []Failure, starved []object.Ref) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for key, ro := range w.running {
		if ro.reserved || w.Timeout <= 0 || now.Sub(ro.start) < w.Timeout {
			continue
		}
		delete(w.running, key)
		w.failed[key] = ro
		failures = append(failures, Failure{Key: key, Sources: ro.sources, Here: ro.here})
	}
	slices.SortFunc(failures, func(a, b Failure) int { return object.Compare(a.Key, b.Key) })
	warn := cmp.Or(w.WaitWarn, w.Timeout, 10*time.Minute)
	for k, x := range w.waiting {
		if !x.due.IsZero() {
			if !now.Before(x.due.Add(dueGrace)) {
				delete(w.waiting, k) // it never asked: it holds no place
			}
			continue
		}
		if !x.warned && now.Sub(x.since) >= warn {
			x.warned = true
			starved = append(starved, x.key)
		}
	}
	slices.SortFunc(starved, object.Compare)
	return failures, starved
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
			if slices.ContainsFunc(r.Sources, func(x Source) bool { return sameChange(x, s) }) {
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
// source id: a person released it, or it changed again (the failed
// content is no longer what any restart would roll out). It returns how
// many.
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
	delete(w.done, key)
}

// GoneKind forgets every workload of kind: its API is no longer served.
func (w *Rollouts) GoneKind(kind string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range []map[object.Ref]*rollout{w.running, w.failed} {
		for k := range m {
			if k.Kind == kind {
				delete(m, k)
			}
		}
	}
	for k := range w.waiting {
		if k.Kind == kind {
			delete(w.waiting, k)
		}
	}
	for k := range w.done {
		if k.Kind == kind {
			delete(w.done, k)
		}
	}
}

// Next returns the waiters that may start at now, in order: as many as
// there are free slots (all of them when Max is 0). They include the
// restarts due now that have not asked yet (Defer): waking them again
// makes them ask, or lose their place.
func (w *Rollouts) Next(now time.Time) []object.Ref {
	w.mu.Lock()
	defer w.mu.Unlock()
	order := w.order(now)
	n := len(order)
	if w.Max > 0 {
		n = min(n, max(w.Max-len(w.running), 0))
	}
	out := make([]object.Ref, 0, n)
	for _, x := range order[:n] {
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

// SeenEvicting records the progress of a restart by eviction of key,
// whose restart state is st: rolling while pods created before st.At
// remain. Such a rollout shows neither in the workload's status nor in its
// generation (the template is left alone), so Seen cannot tell it; the
// controller, which lists the pods, tells it here instead, and the cache's
// observations of the workload are not given to Seen.
//
//	event                                   effect
//	rolling, not tracked                    in progress from st.At (a restart
//	                                        of watcher, a handover); failed at
//	                                        once, quietly, if older than Timeout
//	done, in progress (not reserved)        finished (Finished)
//	done, failed                            recovered: holds lifted
func (w *Rollouts) SeenEvicting(key object.Ref, st State, rolling bool, now time.Time) (Finished, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ro, running := w.running[key]
	f, failed := w.failed[key]
	switch {
	case rolling && !running && !failed:
		ro := &rollout{start: st.At, sources: st.Sources, generation: st.Generation}
		if w.Timeout > 0 && now.Sub(st.At) >= w.Timeout {
			ro.found = true
			w.failed[key] = ro
		} else {
			w.running[key] = ro
		}
	case !rolling && running && !ro.reserved:
		delete(w.running, key)
		out := Finished{Kind: key.Kind}
		if ro.here {
			out.Duration = now.Sub(ro.start)
		}
		return out, true
	case !rolling && failed:
		delete(w.failed, key)
		return Finished{Kind: key.Kind, Recovered: true, Quiet: f.found}, true
	}
	return Finished{}, false
}
