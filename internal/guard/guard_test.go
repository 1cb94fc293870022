package guard_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/object"
)

var t0 = time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)

// at is t0 plus d.
func at(d time.Duration) time.Time { return t0.Add(d) }

func req(key string, now time.Time, sources ...guard.Source) guard.Request {
	return guard.Request{Workload: dep(key), Sources: sources, Now: now}
}

// dep names the Deployment "ns/name".
func dep(key string) object.Ref {
	ns, name, _ := strings.Cut(key, "/")
	return object.Ref{Kind: "Deployment", Namespace: ns, Name: name}
}

// obj names "Kind ns/name".
func obj(s string) object.Ref {
	kind, rest, _ := strings.Cut(s, " ")
	ns, name, _ := strings.Cut(rest, "/")
	return object.Ref{Kind: kind, Namespace: ns, Name: name}
}

func TestBudget(t *testing.T) {
	type step struct {
		at       time.Duration
		released bool
		hold     bool
		until    time.Duration // when held
	}
	tests := []struct {
		name   string
		max    int
		window time.Duration
		steps  []step
	}{
		{name: "off", max: 0, window: time.Hour, steps: []step{{at: 0}, {at: 1}, {at: 2}, {at: 3}}},
		{
			name: "2 per minute: the third waits for the first to leave", max: 2, window: time.Minute,
			steps: []step{{at: 0}, {at: 10 * time.Second}, {at: 20 * time.Second, hold: true, until: time.Minute},
				{at: 59 * time.Second, hold: true, until: time.Minute}, {at: time.Minute},
				{at: 61 * time.Second, hold: true, until: 70 * time.Second}},
		},
		{
			name: "a person releases", max: 1, window: time.Hour,
			steps: []step{{at: 0}, {at: time.Minute, hold: true, until: time.Hour}, {at: 2 * time.Minute, released: true},
				{at: 3 * time.Minute, hold: true, until: 2*time.Minute + time.Hour}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := guard.NewBudget(tt.max, tt.window)
			for i, s := range tt.steps {
				r := req("ns/a", at(s.at))
				r.Released = s.released
				v := b.Check(r)
				if v.Hold != s.hold || (s.hold && (!v.Until.Equal(at(s.until)) || v.Reason != guard.ReasonBudget)) {
					t.Fatalf("step %d at %s: %+v, want hold %v until %s", i, s.at, v, s.hold, s.until)
				}
				if !v.Hold {
					b.Commit(r)
				}
				if other := b.Check(req("ns/b", at(s.at))); other.Hold {
					t.Fatalf("step %d: another workload held: %+v", i, other)
				}
			}
			b.Sweep(at(24 * time.Hour))
			if b.Len() != 0 {
				t.Errorf("Sweep kept %d workloads", b.Len())
			}
		})
	}
}

func TestFlaps(t *testing.T) {
	src := guard.Source{Object: obj("Secret shop/tls"), Sum: "s1"}
	type change struct {
		at      time.Duration
		writers []string
		starts  bool // Observe says it starts flapping
	}
	tests := []struct {
		name    string
		changes []change
		// then, a restart asked at ask is held until until (zero: admitted)
		ask, until time.Duration
		message    string
	}{
		{
			name:    "five changes in the window: not flapping",
			changes: []change{{at: 0}, {at: time.Minute}, {at: 2 * time.Minute}, {at: 3 * time.Minute}, {at: 4 * time.Minute}},
			ask:     4*time.Minute + time.Second,
		},
		{
			name: "the sixth in the window flaps, naming both writers",
			changes: []change{{at: 0, writers: []string{"vault-injector"}}, {at: time.Second, writers: []string{"cert-manager"}},
				{at: 2 * time.Second, writers: []string{"vault-injector"}}, {at: 3 * time.Second, writers: []string{"cert-manager"}},
				{at: 4 * time.Second}, {at: 5 * time.Second, writers: []string{"vault-injector"}, starts: true}, {at: 6 * time.Second}},
			ask: 7 * time.Second, until: 6*time.Second + 2*time.Minute,
			message: "Secret shop/tls changed 6 times in 10m (after coalescing bursts) by cert-manager and vault-injector; restarts held until it is quiet for 2m",
		},
		{
			name: "quiet for 2m: released, one restart",
			changes: []change{{at: 0}, {at: time.Second}, {at: 2 * time.Second}, {at: 3 * time.Second}, {at: 4 * time.Second},
				{at: 5 * time.Second, starts: true}},
			ask: 5*time.Second + 2*time.Minute,
		},
		{
			name:    "changes spread wider than the window never flap",
			changes: []change{{at: 0}, {at: 3 * time.Minute}, {at: 6 * time.Minute}, {at: 9 * time.Minute}, {at: 12 * time.Minute}, {at: 15 * time.Minute}, {at: 18 * time.Minute}},
			ask:     18*time.Minute + time.Second,
		},
		{
			name: "flapping again after a quiet spell starts again",
			changes: []change{{at: 0}, {at: time.Second}, {at: 2 * time.Second}, {at: 3 * time.Second}, {at: 4 * time.Second},
				{at: 5 * time.Second, starts: true}, {at: 3 * time.Minute, starts: true}},
			ask: 3*time.Minute + time.Second, until: 5 * time.Minute,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := guard.NewFlaps(5, 10*time.Minute, 2*time.Minute)
			for i, c := range tt.changes {
				f.Touch(src.Object, at(c.at), c.writers)
				started, msg := f.Observe(src.Object, at(c.at))
				if started != c.starts {
					t.Fatalf("change %d at %s: started %v (%q), want %v", i, c.at, started, msg, c.starts)
				}
			}
			v := f.Check(req("shop/web", at(tt.ask), src))
			if v.Hold != (tt.until != 0) || (v.Hold && !v.Until.Equal(at(tt.until))) {
				t.Fatalf("Check at %s = %+v, want held until %s", tt.ask, v, tt.until)
			}
			if tt.message != "" && v.Message != tt.message {
				t.Errorf("message %q, want %q", v.Message, tt.message)
			}
			if v.Hold {
				r := req("shop/web", at(tt.ask), src)
				r.Released = true
				if f.Check(r).Hold {
					t.Error("released restart held")
				}
				if f.Check(req("shop/web", at(tt.ask), guard.Source{Object: obj("Secret shop/other")})).Hold {
					t.Error("restart for another source held")
				}
			}
		})
	}
}

func TestFlapsSweep(t *testing.T) {
	f := guard.NewFlaps(1, time.Minute, 10*time.Second)
	f.Touch(obj("ConfigMap a/x"), at(0), []string{"a"})
	f.Observe(obj("ConfigMap a/x"), at(0))
	f.Touch(obj("ConfigMap a/x"), at(time.Second), []string{"b"})
	if started, _ := f.Observe(obj("ConfigMap a/x"), at(time.Second)); !started {
		t.Fatal("not flapping after 2 changes with threshold 1")
	}
	f.Observe(obj("ConfigMap a/y"), at(time.Second))
	if stopped, n := f.Sweep(at(5 * time.Second)); len(stopped) != 0 || n != 1 {
		t.Errorf("Sweep at 5s = %v, %d; want none stopped, 1 flapping", stopped, n)
	}
	if stopped, n := f.Sweep(at(11 * time.Second)); len(stopped) != 1 || stopped[0] != obj("ConfigMap a/x") || n != 0 {
		t.Errorf("Sweep at 11s = %v, %d; want x stopped", stopped, n)
	}
	if w := f.Writers(obj("ConfigMap a/x"), at(12*time.Second)); len(w) != 2 {
		t.Errorf("Writers = %v", w)
	}
	if f.Sweep(at(2 * time.Minute)); f.Len() != 0 {
		t.Errorf("Sweep kept %d sources", f.Len())
	}
	off := guard.NewFlaps(0, time.Minute, time.Second)
	for i := range 10 {
		off.Touch(obj("ConfigMap a/x"), at(time.Duration(i)), nil)
		if started, _ := off.Observe(obj("ConfigMap a/x"), at(time.Duration(i))); started {
			t.Fatal("threshold 0 flaps")
		}
	}
	if last, ok := off.LastChange(obj("ConfigMap a/x")); !ok || !last.Equal(at(9)) {
		t.Errorf("LastChange = %v, %v", last, ok)
	}
}

// TestSettles: a restart waits until its sources have been quiet for the
// quiet period, at most the maximum from the first change; a last change
// not known is quiet; Reloader's pause period holds from the first change
// for the period, however quiet, and says so.
func TestSettles(t *testing.T) {
	for _, tt := range []struct {
		name   string
		settle guard.Settle
		now    time.Duration
		reason guard.Reason // "": admitted
		until  time.Duration
	}{
		{"none", guard.Settle{Opened: at(0), Last: at(0)}, 0, "", 0},
		{"a lone change, quiet", guard.Settle{Quiet: 2 * time.Second, Max: 2 * time.Minute, Opened: at(0), Last: at(0)}, 2 * time.Second, "", 0},
		{"a lone change, not yet quiet", guard.Settle{Quiet: time.Minute, Max: 2 * time.Minute, Opened: at(0), Last: at(0)}, 10 * time.Second, guard.ReasonChangeSet, time.Minute},
		{"a second source 40s later", guard.Settle{Quiet: time.Minute, Max: 2 * time.Minute, Opened: at(0), Last: at(40 * time.Second)}, 60 * time.Second, guard.ReasonChangeSet, 100 * time.Second},
		{"bounded by the maximum", guard.Settle{Quiet: time.Minute, Max: 2 * time.Minute, Opened: at(0), Last: at(110 * time.Second)}, 111 * time.Second, guard.ReasonChangeSet, 2 * time.Minute},
		{"past the maximum", guard.Settle{Quiet: time.Minute, Max: 2 * time.Minute, Opened: at(0), Last: at(110 * time.Second)}, 2 * time.Minute, "", 0},
		{"last change not known", guard.Settle{Quiet: time.Minute, Max: 2 * time.Minute, Opened: at(0)}, 0, "", 0},
		{"pause period", guard.Settle{Quiet: time.Minute, Max: time.Minute, Opened: at(0), Last: at(50 * time.Second), Pause: true}, 55 * time.Second, guard.ReasonPausePeriod, time.Minute},
		{"pause period over", guard.Settle{Quiet: time.Minute, Max: time.Minute, Opened: at(0), Last: at(50 * time.Second), Pause: true}, time.Minute, "", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := req("ns/a", at(tt.now))
			r.Settle = tt.settle
			v := guard.Settles{}.Check(r)
			if v.Hold != (tt.reason != "") || v.Reason != tt.reason || (v.Hold && !v.Until.Equal(at(tt.until))) {
				t.Errorf("Check = %+v, want reason %q until %s", v, tt.reason, tt.until)
			}
		})
	}
}

// TestPendingSigned: the pending change set is read back only on the
// workload it was written for, with the installation's key; Holds tells a
// set that grew or changed content from the same set.
func TestPendingSigned(t *testing.T) {
	a := guard.Source{Object: obj("ConfigMap shop/a"), Sum: "0123456789abcdef0123456789abcdef", Keys: []string{"user"}}
	b := guard.Source{Object: obj("Secret shop/b"), Sum: "fedcba9876543210fedcba9876543210", Keys: []string{"password", "token"}}
	p := guard.Pending{Opened: at(0), Last: at(40 * time.Second), Sources: []guard.Source{a, b}}
	v := p.Encode("uid-1", sign("k"))
	got, err := guard.DecodePending(v, "uid-1", sign("k"))
	if err != nil || !got.Equal(p) || !got.Holds([]guard.Source{a, b}) ||
		!slices.Equal(got.Sources[0].Keys, a.Keys) || !slices.Equal(got.Sources[1].Keys, b.Keys) {
		t.Fatalf("DecodePending = %+v, %v", got, err)
	}
	if shown, err := guard.ReadPending(v); err != nil || !slices.Equal(shown.Sources[1].Keys, b.Keys) {
		t.Errorf("ReadPending = %+v, %v", shown, err)
	}
	if got.Holds([]guard.Source{a}) || got.Holds([]guard.Source{a, {Object: b.Object, Sum: "0000000000000000"}}) {
		t.Error("a smaller set, or another content, held as the same change")
	}
	for name, tc := range map[string]struct{ v, uid, key string }{
		"copied to another workload": {v, "uid-2", "k"},
		"another installation":       {v, "uid-1", "other"},
		"a restart state":            {guard.State{At: at(0)}.Encode("uid-1", sign("k")), "uid-1", "k"},
	} {
		if _, err := guard.DecodePending(tc.v, tc.uid, sign(tc.key)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestProducing: a restart waits for producers still writing, and for
// failed producers of the sources it changes, until the timeout, then
// rolls (or, with OnTimeoutHold, holds); a failed producer of a source it
// does not change holds nothing (Ignored lists it, for a Warning).
func TestProducing(t *testing.T) {
	writing := guard.Producer{Object: obj("ExternalSecret shop/pass"), Source: obj("Secret shop/pass"), Message: "not synced"}
	failed := writing
	failed.Failed, failed.Message = true, `Ready=False "SecretSyncedError"`
	pass := []guard.Source{{Object: obj("Secret shop/pass"), Sum: "s2"}}
	cfg := []guard.Source{{Object: obj("ConfigMap shop/cfg"), Sum: "c2"}}
	for _, tt := range []struct {
		name      string
		gate      guard.Producing
		producers []guard.Producer
		changed   []guard.Source // the restart's sources
		now       time.Duration
		released  bool
		reason    guard.Reason // "": admitted
		until     time.Duration
		timedOut  bool
		ignored   int
	}{
		{"none", guard.Producing{Timeout: time.Minute}, nil, cfg, 0, false, "", 0, false, 0},
		{"writing", guard.Producing{Timeout: time.Minute}, []guard.Producer{writing}, pass, 10 * time.Second, false, guard.ReasonChangeSet, time.Minute, false, 0},
		{"writing an unchanged source: still waited for", guard.Producing{Timeout: time.Minute}, []guard.Producer{writing}, cfg, 10 * time.Second, false, guard.ReasonChangeSet, time.Minute, false, 0},
		{"writing, no bound", guard.Producing{}, []guard.Producer{writing}, pass, time.Hour, false, guard.ReasonChangeSet, 0, false, 0},
		{"timed out: rolls", guard.Producing{Timeout: time.Minute}, []guard.Producer{writing}, pass, time.Minute, false, "", 0, true, 0},
		{"timed out: holds", guard.Producing{Timeout: time.Minute, OnTimeoutHold: true}, []guard.Producer{writing}, pass, time.Minute, false, guard.ReasonProducer, 0, false, 0},
		{"failed, of the changed source: held until the timeout", guard.Producing{Timeout: time.Minute}, []guard.Producer{writing, failed}, pass, 10 * time.Second, false, guard.ReasonProducer, time.Minute, false, 0},
		{"failed, of the changed source, timed out: rolls", guard.Producing{Timeout: time.Minute}, []guard.Producer{failed}, pass, time.Hour, false, "", 0, true, 0},
		{"failed, of the changed source, timed out: holds if asked", guard.Producing{Timeout: time.Minute, OnTimeoutHold: true}, []guard.Producer{failed}, pass, time.Hour, false, guard.ReasonProducer, 0, false, 0},
		{"failed, of the changed source, no bound", guard.Producing{}, []guard.Producer{failed}, pass, 24 * time.Hour, false, guard.ReasonProducer, 0, false, 0},
		{"failed, of an unchanged source: not waited for", guard.Producing{Timeout: time.Minute, OnTimeoutHold: true}, []guard.Producer{failed}, cfg, 0, false, "", 0, false, 1},
		{"failed, of an unchanged source, no bound: not waited for", guard.Producing{}, []guard.Producer{failed}, cfg, 24 * time.Hour, false, "", 0, false, 1},
		{"failed, released", guard.Producing{Timeout: time.Minute}, []guard.Producer{failed}, pass, 0, true, "", 0, false, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := req("shop/app", at(tt.now), tt.changed...)
			r.Settle.Opened = at(0)
			r.Producers, r.Released = tt.producers, tt.released
			v := tt.gate.Check(r)
			if v.Hold != (tt.reason != "") || v.Reason != tt.reason || (v.Hold && tt.until != 0 && !v.Until.Equal(at(tt.until))) || (v.Hold && tt.until == 0 && !v.Until.IsZero()) {
				t.Errorf("Check = %+v, want reason %q until %s", v, tt.reason, tt.until)
			}
			if v.Hold && (!strings.Contains(v.Message, "ExternalSecret pass") || strings.Contains(v.Message, "%!")) {
				t.Errorf("message %q", v.Message)
			}
			if got := tt.gate.TimedOut(r); got != tt.timedOut {
				t.Errorf("TimedOut = %v, want %v", got, tt.timedOut)
			}
			if got := tt.gate.Ignored(r); len(got) != tt.ignored {
				t.Errorf("Ignored = %v, want %d", got, tt.ignored)
			}
		})
	}
}

// TestWaitingTakesNoSlot: a restart waiting for its change set (or a
// producer) takes no rollout slot: with one slot, another workload's
// restart is admitted meanwhile.
func TestWaitingTakesNoSlot(t *testing.T) {
	w := guard.NewRollouts(1, 10*time.Minute, true)
	chain := guard.Chain{guard.Settles{}, guard.Producing{Timeout: time.Minute}, w}
	settling := req("a/settling", at(time.Second))
	settling.Settle = guard.Settle{Quiet: time.Minute, Max: 2 * time.Minute, Opened: at(0), Last: at(0)}
	if v := chain.Check(settling); !v.Hold || v.Reason != guard.ReasonChangeSet {
		t.Fatalf("settling: %+v", v)
	}
	producing := req("b/producing", at(time.Second))
	producing.Producers = []guard.Producer{{Object: obj("ExternalSecret b/pass"), Source: obj("Secret b/pass")}}
	if v := chain.Check(producing); !v.Hold || v.Reason != guard.ReasonChangeSet {
		t.Fatalf("producing: %+v", v)
	}
	if v := chain.Check(req("c/web", at(time.Second))); v.Hold {
		t.Errorf("the one slot was taken by restarts that wait: %+v", v)
	}
}
