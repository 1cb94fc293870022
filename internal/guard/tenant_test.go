package guard_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/watcher-dev/watcher/internal/guard"
)

// sign is a Signer with a fixed key, as the installation's.
func sign(key string) guard.Signer {
	return func(b []byte) string {
		m := hmac.New(sha256.New, []byte(key))
		m.Write(b)
		return hex.EncodeToString(m.Sum(nil))
	}
}

// TestWaveFairBetweenNamespaces: team A restarts ten never-ready
// Deployments with the lowest priority every 9 minutes, releasing its own
// budget holds; team B's one restart gets a slot at once (a namespace
// never holds every slot), and team A's re-restarts never extend their
// timeout.
func TestWaveFairBetweenNamespaces(t *testing.T) {
	budget := guard.NewBudget(5, time.Hour)
	waves := guard.NewRollouts(10, 10*time.Minute, true)
	chain := guard.Chain{budget, waves.FailedGate(), waves}
	ask := func(r guard.Request) bool {
		v := chain.Check(r)
		if v.Hold && v.Reason == guard.ReasonBudget {
			r.Released = true
			v = chain.Check(r)
		}
		if !v.Hold {
			chain.Commit(r)
		}
		return !v.Hold
	}
	a := func(i int, now time.Time) guard.Request {
		r := req(fmt.Sprintf("team-a/broken-%d", i), now, guard.Source{Object: obj(fmt.Sprintf("ConfigMap team-a/cfg-%d", i)), Sum: now.String()})
		r.Priority = -1000
		return r
	}
	admitted := 0
	for i := range 10 {
		if ask(a(i, at(0))) {
			admitted++
		}
	}
	if admitted != 9 {
		t.Errorf("team A got %d of 10 slots, want 9 (one left for others)", admitted)
	}
	b := req("team-b/web", at(time.Minute))
	if v := chain.Check(b); v.Hold {
		t.Fatalf("team B held at once: %s", v.Message)
	}
	// Team A keeps restarting; its rollouts still time out at 10m.
	for m := 1; m <= 60; m++ {
		now := at(time.Duration(m) * time.Minute)
		if m%9 == 0 {
			for i := range 10 {
				ask(a(i, now))
			}
		}
		failures, _ := waves.Sweep(now)
		if m == 10 && len(failures) != 9 {
			t.Errorf("at 10m %d of team A's rollouts failed, want 9: re-restarts must not extend the timeout", len(failures))
		}
	}
}

// TestWaveStarvedReported: a restart waiting longer than WaitWarn is
// returned by Sweep once.
func TestWaveStarvedReported(t *testing.T) {
	w := guard.NewRollouts(1, time.Hour, false)
	w.WaitWarn = time.Minute
	chain := guard.Chain{w}
	r := req("a/a", at(0))
	chain.Check(r)
	chain.Commit(r)
	if v := chain.Check(req("b/b", at(time.Second))); !v.Hold {
		t.Fatal("second restart admitted with one slot")
	}
	if _, s := w.Sweep(at(30 * time.Second)); len(s) != 0 {
		t.Errorf("starved after 30s: %v", s)
	}
	if _, s := w.Sweep(at(2 * time.Minute)); len(s) != 1 || s[0] != dep("b/b") {
		t.Errorf("starved after 2m: %v", s)
	}
	if _, s := w.Sweep(at(3 * time.Minute)); len(s) != 0 {
		t.Errorf("reported twice: %v", s)
	}
}

// TestStateSigned: the state of a restart is read back only on the
// workload it was written for, unchanged, with the installation's key.
func TestStateSigned(t *testing.T) {
	st := guard.State{At: at(0), Generation: 7, Times: []time.Time{at(-time.Minute), at(0)},
		Sources: []guard.Source{{Object: obj("ConfigMap shop/cfg"), Sum: "0123456789abcdef0123456789abcdef"}}}
	v := st.Encode("uid-1", sign("k"))
	got, err := guard.DecodeState(v, "uid-1", sign("k"))
	if err != nil || got.Generation != 7 || len(got.Times) != 2 || len(got.Sources) != 1 || got.Sources[0].Sum != "0123456789abcdef" {
		t.Fatalf("DecodeState = %+v, %v", got, err)
	}
	if got.Evict {
		t.Error("a restart by a patch read back as by eviction")
	}
	// A state written by the version before Evict (no "by" field) is
	// still read, and signs alike; one by eviction says so.
	old := `{"at":1767261600,"gen":7,"mac":"` + sign("k")([]byte("watcher restart state v1\x00uid-1\x00"+`{"at":1767261600,"gen":7,"mac":""}`)) + `"}`
	if got, err := guard.DecodeState(old, "uid-1", sign("k")); err != nil || got.Evict || got.Generation != 7 {
		t.Errorf("state of the previous version: %+v, %v", got, err)
	}
	ev := guard.State{At: at(0), Generation: 7, Evict: true}.Encode("uid-1", sign("k"))
	if got, err := guard.DecodeState(ev, "uid-1", sign("k")); err != nil || !got.Evict {
		t.Errorf("state of a restart by eviction: %+v, %v", got, err)
	}
	for name, tc := range map[string]struct{ v, uid, key string }{
		"copied to another workload": {v, "uid-2", "k"},
		"eviction flag removed":      {strings.Replace(ev, `"by":"evict",`, "", 1), "uid-1", "k"},
		"another installation":       {v, "uid-1", "other"},
		"edited":                     {v[:10] + "9" + v[11:], "uid-1", "k"},
		"forged without the key":     {guard.State{At: at(0), Generation: 7}.Encode("uid-1", sign("guess")), "uid-1", "k"},
	} {
		if _, err := guard.DecodeState(tc.v, tc.uid, sign(tc.key)); err == nil {
			t.Errorf("%s: accepted", name)
		} else if name != "edited" && !errors.Is(err, guard.ErrForged) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestForgedOrCopiedRolloutTakesNoSlot: workloads that are not available
// but carry no state watcher signed for them (a copy, a forgery: the
// controller passes no State) take no slot and never fail.
func TestForgedOrCopiedRolloutTakesNoSlot(t *testing.T) {
	w := guard.NewRollouts(2, 10*time.Minute, true)
	for i := range 10 {
		w.Seen(dep(fmt.Sprintf("team-a/fake-%d", i)), guard.Observation{Rolling: true, Generation: 1, Now: at(0)})
	}
	if v := w.Check(req("team-b/web", at(time.Second))); v.Hold {
		t.Errorf("held by rollouts watcher never started: %s", v.Message)
	}
	if f, _ := w.Sweep(at(time.Hour)); len(f) != 0 {
		t.Errorf("failed rollouts watcher never started: %v", f)
	}
}

// TestNotWatchersAfterDone: once the generation watcher wrote rolled out,
// the workload unavailable again (a drain, a crash loop) or at a later
// generation (a scale-up) is not watcher's rollout.
func TestNotWatchersAfterDone(t *testing.T) {
	w := guard.NewRollouts(1, 10*time.Minute, true)
	st := &guard.State{At: at(0), Generation: 4}
	r := req("a/a", at(0))
	guard.Chain{w}.Check(r)
	w.Wrote(r.Workload, 4)
	w.Commit(r)
	if _, ok := w.Seen(r.Workload, guard.Observation{Generation: 4, State: st, Now: at(time.Minute)}); !ok {
		t.Fatal("not finished when done")
	}
	for _, o := range []guard.Observation{
		{Rolling: true, Generation: 4, State: st, Now: at(2 * time.Minute)}, // drained
		{Rolling: true, Generation: 5, State: st, Now: at(3 * time.Minute)}, // scaled up
	} {
		w.Seen(r.Workload, o)
		if running, failed := w.InProgress(); running+failed != 0 {
			t.Errorf("%+v counted as watcher's rollout", o)
		}
	}
}

// TestHoldsSurviveRestart: a new process (or a new leader) rebuilds from
// the state kept on the workloads: a rollout past its timeout still holds
// the rest of its change (quietly: the old process reported it), and the
// budget still counts the restarts written before.
func TestHoldsSurviveRestart(t *testing.T) {
	bad := guard.Source{Object: obj("ConfigMap shop/shared"), Sum: "bad0000000000000000000000000000"}
	st := &guard.State{At: at(0), Generation: 2, Times: []time.Time{at(0)}, Sources: []guard.Source{bad}}
	after := guard.NewRollouts(10, 10*time.Minute, true)
	after.Seen(dep("shop/first"), guard.Observation{Rolling: true, Generation: 2, State: st, Now: at(13 * time.Minute)})
	other := req("shop/other", at(14*time.Minute), bad)
	if v := after.FailedGate().Check(other); !v.Hold || v.Reason != guard.ReasonFailedRollout {
		t.Errorf("the same bad change rolls to the other users after a restart: %+v", v)
	}
	if f, _ := after.Sweep(at(30 * time.Minute)); len(f) != 0 {
		t.Errorf("a failure found after a restart is reported again: %v", f)
	}
	if f, ok := after.Seen(dep("shop/first"), guard.Observation{Generation: 2, State: st, Now: at(31 * time.Minute)}); !ok || !f.Recovered || !f.Quiet {
		t.Errorf("recovery = %+v, %v", f, ok)
	}
	b := guard.NewBudget(1, time.Hour)
	r := req("shop/web", at(2*time.Minute))
	r.History = st.Times
	if v := b.Check(r); !v.Hold {
		t.Error("after a handover the budget is fresh")
	}
	if times := guard.NewBudget(3, time.Hour).Times(r); len(times) != 2 {
		t.Errorf("times to keep %v", times)
	}
}
