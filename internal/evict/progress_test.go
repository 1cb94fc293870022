package evict_test

import (
	"testing"
	"time"

	"github.com/watcher-dev/watcher/internal/evict"
	"github.com/watcher-dev/watcher/internal/object"
)

// TestTracker walks one restart through each line of Tracker's table: the
// backoff, its end at the timeout, a resumption by an event, a stop that
// only an event lifts, and done.
func TestTracker(t *testing.T) {
	key := object.Ref{Kind: "Deployment", Namespace: "ns", Name: "web"}
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	tr := &evict.Tracker{Timeout: 10 * time.Minute}
	type step struct {
		name string
		at   time.Duration // the clock, after t0
		do   func(now time.Time) any
		want any
	}
	look := func(now time.Time) any { return tr.Look(key, t0, now) }
	looked := func(progressed bool) func(now time.Time) any {
		return func(now time.Time) any { return tr.Looked(key, t0, now, progressed) }
	}
	steps := []step{
		{"first look", 0, look, evict.Verdict{Look: true}},
		{"then 2 s", 0, looked(false), 2 * time.Second},
		{"not due: ask again when due", time.Second, look, evict.Verdict{After: time.Second}},
		{"due", 2 * time.Second, look, evict.Verdict{Look: true}},
		{"then 4 s", 2 * time.Second, looked(false), 4 * time.Second},
		{"then 8 s", 6 * time.Second, looked(false), 8 * time.Second},
		{"an eviction passed: 2 s again", 14 * time.Second, looked(true), 2 * time.Second},
		{"then 4 s", 16 * time.Second, looked(false), 4 * time.Second},
		{"an event: look at once", 17 * time.Second, func(now time.Time) any { tr.Touch(key); return tr.Look(key, t0, now) }, evict.Verdict{Look: true}},
		{"backoff reset", 17 * time.Second, looked(false), 2 * time.Second},
		{"up to 5 min", time.Minute, func(now time.Time) any {
			var d time.Duration
			for range 10 {
				d = tr.Looked(key, t0, now, false)
			}
			return d
		}, evict.MaxLook},
		{"a wait past the end: no requeue", 6 * time.Minute, looked(false), time.Duration(0)},
		{"past the end: timed out", 10 * time.Minute, look, evict.Verdict{TimedOut: true}},
		{"still, much later", 3 * time.Hour, look, evict.Verdict{TimedOut: true}},
		{"an event resumes it", 3 * time.Hour, func(now time.Time) any { tr.Touch(key); return tr.Look(key, t0, now) }, evict.Verdict{Look: true, Resumed: true}},
		{"for another timeout", 3*time.Hour + 9*time.Minute, look, evict.Verdict{Look: true}},
		{"which ends too", 3*time.Hour + 10*time.Minute, look, evict.Verdict{TimedOut: true}},
		{"an event, then a refusal no retry lifts", 4 * time.Hour, func(now time.Time) any {
			tr.Touch(key)
			tr.Look(key, t0, now)
			tr.Stopped(key, t0)
			return tr.Look(key, t0, now.Add(time.Minute))
		}, evict.Verdict{}},
		{"an event lifts it", 4*time.Hour + 2*time.Minute, func(now time.Time) any { tr.Touch(key); return tr.Look(key, t0, now) }, evict.Verdict{Look: true}},
		{"done: nothing", 4*time.Hour + 3*time.Minute, func(now time.Time) any { tr.Done(key, t0); return tr.Look(key, t0, now) }, evict.Verdict{}},
		{"a new restart: looked at", 5 * time.Hour, func(now time.Time) any { return tr.Look(key, now, now) }, evict.Verdict{Look: true}},
	}
	for _, s := range steps {
		if got := s.do(t0.Add(s.at)); got != s.want {
			t.Errorf("%s (at %s): %+v, want %+v", s.name, s.at, got, s.want)
		}
	}
}

// TestTrackerNoTimeout: with no timeout the looks go on, every MaxLook.
func TestTrackerNoTimeout(t *testing.T) {
	key := object.Ref{Kind: "StatefulSet", Namespace: "ns", Name: "db"}
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	var tr evict.Tracker
	now := t0
	for range 30 {
		if v := tr.Look(key, t0, now); !v.Look {
			t.Fatalf("at %s: %+v", now.Sub(t0), v)
		}
		now = now.Add(tr.Looked(key, t0, now, false))
	}
	if d := tr.Looked(key, t0, now, false); d != evict.MaxLook {
		t.Errorf("wait %s, want %s", d, evict.MaxLook)
	}
}

// TestTrackerSay: a refusal is said once per restart, until another comes
// or an eviction passes; a new restart says it again.
func TestTrackerSay(t *testing.T) {
	key := object.Ref{Kind: "Deployment", Namespace: "ns", Name: "web"}
	t1, t2 := time.Unix(100, 0), time.Unix(200, 0)
	var tr evict.Tracker
	for i, s := range []struct {
		at   time.Time
		msg  string
		want bool
	}{
		{t1, "budget web needs 1", true},
		{t1, "budget web needs 1", false},
		{t1, "budget web needs 2", true},
		{t1, "", false},
		{t1, "budget web needs 2", true},
		{t2, "budget web needs 2", true},
	} {
		if got := tr.Say(key, s.at, s.msg); got != s.want {
			t.Errorf("step %d (%q): %v, want %v", i, s.msg, got, s.want)
		}
	}
	tr.Forget(key)
	if !tr.Say(key, t2, "budget web needs 2") {
		t.Error("a deleted workload is not forgotten")
	}
}
