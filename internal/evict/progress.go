package evict

import (
	"sync"
	"time"

	"github.com/watcher-dev/watcher/internal/object"
)

// The waits between two looks at a restart by eviction that is not done:
// the first is FirstLook, each next one twice the last, up to MaxLook. An
// eviction that passes, or an event of the workload, starts again from
// FirstLook.
const (
	FirstLook = 2 * time.Second
	MaxLook   = 5 * time.Minute
)

// Tracker remembers, per workload, what the controller needs between two
// looks at a restart by eviction: when to look again (the backoff), until
// when (the restart's timeout), whether an event of the workload came
// since the last look, and what was last reported. It never decides from
// memory alone what the cluster says: a restart's time (guard.State.At)
// and whether it is done (DoneAnnotation) are read from the workload, so
// a restart of watcher or a new leader loses only the backoff, and at
// worst looks once more, never polls a restart past its timeout again.
//
// A workload's looks at its restart at are decided by Look, at each of its
// reconciles, before any request:
//
//	state of the restart                     verdict
//	done (Looked, or DoneAnnotation)         nothing
//	an event of the workload since the last  look now; backoff from FirstLook;
//	  look (Touch)                           past its end: resumed, it ends
//	                                         Timeout from now
//	past its end (at+Timeout, or the end     timed out: no look, no requeue
//	  of its resumption)
//	its next look not due                    no look; ask again when due
//	otherwise (first look, or due)           look now
//
// and after each look that found it not done, Looked says when to look
// again: FirstLook after an eviction passed, else twice the last wait (up
// to MaxLook); never past its end (then no requeue: it has timed out).
//
// Stopped ends the looks until the next event (a refusal that no retry
// can lift: watcher's missing rights). The zero Tracker never times out.
type Tracker struct {
	// Timeout ends the looks at a restart this long after it was written
	// (watcher's --rollout-timeout): the guards fail its rollout then.
	// 0: never.
	Timeout time.Duration

	mu sync.Mutex
	m  map[object.Ref]*track
}

// track is the memory of one workload's restart by eviction.
type track struct {
	at      time.Time     // the restart's time, as on the workload
	end     time.Time     // the looks stop then; zero: never
	every   time.Duration // the last wait between two looks; 0: none yet
	next    time.Time     // the next look is due then; zero: now
	touched bool          // an event of the workload came since the last look
	done    bool          // seen done
	stopped bool          // a refusal no retry lifts: no look until an event
	said    string        // the last refusal reported
}

// Verdict is what Look decides.
type Verdict struct {
	// Look: list the pods and evict now.
	Look bool
	// After, when no look is due now, is when to ask again; 0: not before
	// an event.
	After time.Duration
	// TimedOut: the restart is past its end, not done: its rollout has
	// failed (the guards are told), and nothing more is asked of the API
	// server until an event of the workload.
	TimedOut bool
	// Resumed: an event came after the restart had timed out.
	Resumed bool
}

// entry returns the memory of key for the restart at, a new one if it
// has none or one of another restart. Called with t.mu held.
func (t *Tracker) entry(key object.Ref, at time.Time) *track {
	if t.m == nil {
		t.m = map[object.Ref]*track{}
	}
	e := t.m[key]
	if e == nil || !e.at.Equal(at) {
		touched := e != nil && e.touched
		e = &track{at: at, touched: touched}
		if t.Timeout > 0 {
			e.end = at.Add(t.Timeout)
		}
		t.m[key] = e
	}
	return e
}

// Look decides, at a reconcile of key whose restart by eviction was
// written at at, whether to look at its pods now (see Tracker).
func (t *Tracker) Look(key object.Ref, at, now time.Time) Verdict {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entry(key, at)
	switch {
	case e.done:
		return Verdict{}
	case e.touched:
		e.touched, e.stopped, e.every, e.next = false, false, 0, time.Time{}
		resumed := !e.end.IsZero() && !now.Before(e.end)
		if resumed {
			e.end = now.Add(t.Timeout)
		}
		return Verdict{Look: true, Resumed: resumed}
	case !e.end.IsZero() && !now.Before(e.end):
		return Verdict{TimedOut: true}
	case e.stopped:
		return Verdict{}
	case now.Before(e.next):
		return Verdict{After: e.next.Sub(now)}
	}
	return Verdict{Look: true}
}

// Looked records a look at key that found its restart not done, at now;
// progressed: an eviction passed. It returns when to look again; 0: not
// before an event (the restart's end comes first).
func (t *Tracker) Looked(key object.Ref, at, now time.Time, progressed bool) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entry(key, at)
	switch {
	case progressed || e.every == 0:
		e.every = FirstLook
	default:
		e.every = min(2*e.every, MaxLook)
	}
	e.next = now.Add(e.every)
	if !e.end.IsZero() && !e.next.Before(e.end) {
		return 0
	}
	return e.every
}

// Stopped ends the looks at key's restart at until the next event of the
// workload (Touch).
func (t *Tracker) Stopped(key object.Ref, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.entry(key, at).stopped = true
}

// Done records that key's restart at is done: it is not looked at again.
func (t *Tracker) Done(key object.Ref, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entry(key, at)
	e.done, e.said = true, ""
}

// Touch records an event of key (its metadata or generation changed, or
// its readiness as the cache shows it): its next reconcile looks at once,
// with the backoff reset, and resumes a restart past its end.
func (t *Tracker) Touch(key object.Ref) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.m[key]; e != nil {
		e.touched = true
	}
}

// Forget drops what is known of key: the workload was deleted.
func (t *Tracker) Forget(key object.Ref) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, key)
}

// Say records msg, a refusal of key's restart at ("" when an eviction
// passed), and reports whether it is new: each refusal is reported once
// per restart, until another comes or an eviction passes.
func (t *Tracker) Say(key object.Ref, at time.Time, msg string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entry(key, at)
	if e.said == msg {
		return false
	}
	e.said = msg
	return msg != ""
}
