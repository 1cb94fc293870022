package guard_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/object"
)

// op is one step of a wave scenario.
type op struct {
	at   time.Duration
	do   string // ask, fail-write, done, rolling, sweep, restart, gone, release, release-source
	key  string // "ns/name"
	prio int
	src  string // source sum, for ask (default "v1")

	hold   guard.Reason // for ask: "" admits
	next   []object.Ref // for done/sweep/restart: Next() after it
	failed []object.Ref // for sweep: the failures
	inProg int          // running after the step, -1: not checked
}

var cfg = "ConfigMap shop/shared"

func TestRollouts(t *testing.T) {
	all := func(keys ...string) []object.Ref {
		out := make([]object.Ref, len(keys))
		for i, k := range keys {
			out[i] = dep(k)
		}
		return out
	}
	tests := []struct {
		name          string
		max           int
		holdOnFailure bool
		ops           []op
	}{
		{
			name: "three slots: a free slot goes to the namespace with the fewest rollouts, then waiting longest", max: 3,
			ops: []op{
				{do: "ask", key: "a/z", inProg: 1}, {do: "ask", key: "a/y", inProg: 2}, {do: "ask", key: "b/a", inProg: 3},
				{do: "ask", key: "c/c", hold: guard.ReasonWave, inProg: 3},
				{do: "ask", key: "c/b", hold: guard.ReasonWave},
				{do: "ask", key: "z/z", prio: -1, hold: guard.ReasonWave},
				// c waits longest; priority does not count across namespaces.
				{at: time.Second, do: "done", key: "a/y", next: all("c/b"), inProg: 2},
				{do: "ask", key: "z/z", prio: -1, hold: guard.ReasonWave, inProg: 2},
				{do: "ask", key: "c/b", inProg: 3},
				// z has no rollout, c has one: z first.
				{do: "done", key: "a/z", next: all("z/z")}, {do: "done", key: "b/a", next: all("z/z", "c/c")},
				{do: "ask", key: "c/c", inProg: 2},
				{do: "ask", key: "z/z", inProg: 3},
			},
		},
		{
			name: "priority orders restarts within a namespace", max: 2,
			ops: []op{
				{do: "ask", key: "b/busy", inProg: 1},
				{do: "ask", key: "a/x", prio: 5, inProg: 2},
				{do: "ask", key: "a/y", prio: -1, hold: guard.ReasonWave},
				{do: "ask", key: "a/w", prio: 0, hold: guard.ReasonWave},
				{do: "done", key: "b/busy", next: nil},     // a holds Max-1 already
				{do: "done", key: "a/x", next: all("a/y")}, // then a/y before a/w
			},
		},
		{
			name: "one namespace never takes the last slot", max: 3,
			ops: []op{
				{do: "ask", key: "a/1", inProg: 1}, {do: "ask", key: "a/2", inProg: 2},
				{do: "ask", key: "a/3", hold: guard.ReasonWave, inProg: 2},
				{do: "ask", key: "b/1", inProg: 3},
			},
		},
		{
			name: "a failed write frees its slot", max: 1,
			ops: []op{
				{do: "fail-write", key: "a/a", inProg: 0},
				{do: "ask", key: "a/b", inProg: 1},
			},
		},
		{
			name: "a workload rolling again takes no second slot", max: 1,
			ops: []op{
				{do: "ask", key: "a/a", inProg: 1}, {do: "ask", key: "a/a", inProg: 1},
				{do: "ask", key: "a/b", hold: guard.ReasonWave},
			},
		},
		{
			name: "watcher restarts mid-wave: in progress rebuilt from the cluster, waiters asked again", max: 2,
			ops: []op{
				{do: "ask", key: "a/1", inProg: 1}, {do: "ask", key: "b/2", inProg: 2},
				{do: "ask", key: "c/3", hold: guard.ReasonWave}, {do: "ask", key: "d/4", hold: guard.ReasonWave},
				{at: time.Second, do: "restart", inProg: 0, next: nil},
				// The new process sees the cluster before its first decision.
				{do: "rolling", key: "a/1", inProg: 1}, {do: "rolling", key: "b/2", inProg: 2},
				{do: "ask", key: "d/4", hold: guard.ReasonWave}, {do: "ask", key: "c/3", hold: guard.ReasonWave},
				{at: 2 * time.Second, do: "done", key: "b/2", next: all("c/3"), inProg: 1},
				{do: "ask", key: "d/4", hold: guard.ReasonWave}, {do: "ask", key: "c/3", inProg: 2},
				{do: "done", key: "a/1", next: all("d/4")}, {do: "ask", key: "d/4", inProg: 2},
			},
		},
		{
			name: "a failed rollout holds the rest of its change, until it recovers", max: 1, holdOnFailure: true,
			ops: []op{
				{do: "ask", key: "a/a", inProg: 1}, {do: "ask", key: "a/b", hold: guard.ReasonWave},
				{at: 9 * time.Minute, do: "sweep", inProg: 1},
				{at: 10 * time.Minute, do: "sweep", failed: all("a/a"), next: all("a/b"), inProg: 0},
				{do: "ask", key: "a/b", hold: guard.ReasonFailedRollout},
				{do: "ask", key: "a/c", src: "v2", inProg: 1}, // another change of the source
				{do: "done", key: "a/a"},                      // recovered
				{do: "ask", key: "a/b", hold: guard.ReasonWave},
			},
		},
		{
			name: "released by a person on the source", max: 0, holdOnFailure: true,
			ops: []op{
				{do: "ask", key: "a/a"}, {at: 11 * time.Minute, do: "sweep", failed: all("a/a"), inProg: 0},
				{do: "ask", key: "a/b", hold: guard.ReasonFailedRollout},
				{do: "release-source"}, {do: "ask", key: "a/b"},
			},
		},
		{
			name: "continue: a failure holds nothing", max: 1,
			ops: []op{
				{do: "ask", key: "a/a"}, {at: 11 * time.Minute, do: "sweep", failed: all("a/a"), inProg: 0},
				{do: "ask", key: "a/b", inProg: 1},
			},
		},
		{
			name: "a deleted workload frees its slot", max: 1,
			ops: []op{
				{do: "ask", key: "a/a"}, {do: "ask", key: "a/b", hold: guard.ReasonWave},
				{do: "gone", key: "a/a", next: all("a/b"), inProg: 0},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := guard.NewRollouts(tt.max, 10*time.Minute, tt.holdOnFailure)
			chain := guard.Chain{w.FailedGate(), w}
			var clock time.Duration
			for i, o := range tt.ops {
				clock = max(clock, o.at)
				now := at(clock)
				src := guard.Source{Object: obj(cfg), Sum: "v1"}
				if o.src != "" {
					src.Sum = o.src
				}
				r := req(o.key, now, src)
				r.Priority = o.prio
				key := dep(o.key)
				switch o.do {
				case "ask":
					v := chain.Check(r)
					if v.Reason != o.hold {
						t.Fatalf("op %d: ask %s: %+v, want %q", i, o.key, v, o.hold)
					}
					if !v.Hold {
						chain.Commit(r)
					}
				case "fail-write":
					if v := chain.Check(r); v.Hold {
						t.Fatalf("op %d: held %+v", i, v)
					}
					chain.Cancel(r)
				case "done", "rolling":
					st := &guard.State{At: now, Sources: []guard.Source{src}}
					w.Seen(key, guard.Observation{Rolling: o.do == "rolling", State: st, Now: now})
				case "sweep":
					var got []object.Ref
					failures, _ := w.Sweep(now)
					for _, f := range failures {
						got = append(got, f.Key)
					}
					if !slices.Equal(got, o.failed) {
						t.Fatalf("op %d: failures %v, want %v", i, got, o.failed)
					}
				case "restart":
					w = guard.NewRollouts(tt.max, 10*time.Minute, tt.holdOnFailure)
					chain = guard.Chain{w.FailedGate(), w}
				case "gone":
					w.Gone(key)
				case "release-source":
					if n := w.ReleaseSource(obj(cfg)); n != 1 {
						t.Fatalf("op %d: released %d", i, n)
					}
				}
				if o.next != nil || o.do == "done" || o.do == "restart" {
					if got := w.Next(now); !slices.Equal(got, o.next) && !(len(got) == 0 && len(o.next) == 0) {
						t.Fatalf("op %d: Next() = %v, want %v", i, got, o.next)
					}
				}
				if running, _ := w.InProgress(); o.inProg != 0 || o.do == "fail-write" || o.do == "restart" || o.do == "gone" {
					if running != o.inProg {
						t.Fatalf("op %d (%s %s): %d in progress, want %d", i, o.do, o.key, running, o.inProg)
					}
				}
			}
		})
	}
}

func TestRolloutDuration(t *testing.T) {
	w := guard.NewRollouts(0, time.Minute, true)
	r := req("a/a", at(0))
	w.Check(r)
	w.Wrote(r.Workload, 5)
	w.Commit(r)
	st := &guard.State{At: at(0), Generation: 5}
	if _, ok := w.Seen(r.Workload, guard.Observation{Generation: 4, State: st, Now: at(time.Second)}); ok {
		t.Error("a state from before the restart finished it")
	}
	f, ok := w.Seen(r.Workload, guard.Observation{Generation: 5, State: st, Now: at(7 * time.Second)})
	if !ok || f.Duration != 7*time.Second || f.Recovered {
		t.Errorf("Seen = %+v, %v", f, ok)
	}
	// Found rolling in the cluster: finished, timed from its state.
	st3 := &guard.State{At: at(0), Generation: 3}
	w.Seen(dep("a/b"), guard.Observation{Rolling: true, Generation: 3, State: st3, Now: at(0)})
	if f, ok := w.Seen(dep("a/b"), guard.Observation{Generation: 3, State: st3, Now: at(time.Second)}); !ok || f.Duration != 0 {
		t.Errorf("Seen = %+v, %v", f, ok)
	}
	if _, ok := w.Seen(dep("a/c"), guard.Observation{Generation: 1, Now: at(time.Second)}); ok {
		t.Error("a workload never rolling finished")
	}
	msg := guard.Chain{w.FailedGate()}.Check(r).Message
	if strings.Contains(msg, "%") {
		t.Errorf("message %q", msg)
	}
}

// TestWaveWokenTogether: restarts of one namespace that a settle held
// together and that wake at the same moment start in priority order,
// whichever asks first; a restart due that never asks holds the others
// for dueGrace at most, one no longer needed (Forget) or deleted (Gone)
// not at all, and one of another namespace never.
func TestWaveWokenTogether(t *testing.T) {
	const quiet = time.Minute
	due := quiet + time.Second // they are decided again just after the settle
	ask := func(chain guard.Chain, key string, prio int, now time.Duration) guard.Verdict {
		r := req(key, at(now), guard.Source{Object: obj(cfg), Sum: "v1"})
		r.Priority = prio
		r.Settle = guard.Settle{Quiet: quiet, Max: 2 * quiet, Opened: at(0), Last: at(0)}
		v := chain.Check(r)
		if !v.Hold {
			chain.Commit(r)
		}
		return v
	}
	done := func(w *guard.Rollouts, key string, now time.Duration) {
		w.Seen(dep(key), guard.Observation{State: &guard.State{At: at(0)}, Now: at(now)})
	}
	type arrival struct {
		key  string
		prio int
	}
	for _, tt := range []struct {
		name string
		// held together by the settle, then asking in this order
		held, asks []arrival
		// then, what happens to the ones that do not ask
		vanish string // "", "forget", "gone", "late"
		want   []string
	}{
		{name: "arriving 2, 1, 0 start 0, 1, 2",
			held: []arrival{{"a/p0", 0}, {"a/p1", 1}, {"a/p2", 2}}, asks: []arrival{{"a/p2", 2}, {"a/p1", 1}, {"a/p0", 0}},
			want: []string{"a/p0", "a/p1", "a/p2"}},
		{name: "without the annotation, last",
			held: []arrival{{"a/none", 1001}, {"a/p5", 5}}, asks: []arrival{{"a/none", 1001}, {"a/p5", 5}},
			want: []string{"a/p5", "a/none"}},
		{name: "one that never asks holds the others for dueGrace",
			held: []arrival{{"a/p0", 0}, {"a/p2", 2}}, asks: []arrival{{"a/p2", 2}}, vanish: "late",
			want: []string{"a/p2"}},
		{name: "one no longer needed holds nothing",
			held: []arrival{{"a/p0", 0}, {"a/p2", 2}}, asks: []arrival{{"a/p2", 2}}, vanish: "forget",
			want: []string{"a/p2"}},
		{name: "one deleted holds nothing",
			held: []arrival{{"a/p0", 0}, {"a/p2", 2}}, asks: []arrival{{"a/p2", 2}}, vanish: "gone",
			want: []string{"a/p2"}},
		{name: "another namespace's is not waited for",
			held: []arrival{{"b/p0", 0}, {"a/p2", 2}}, asks: []arrival{{"a/p2", 2}},
			want: []string{"a/p2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := guard.NewRollouts(1, 10*time.Minute, true)
			chain := guard.Chain{guard.Settles{}, w.FailedGate(), w}
			for _, a := range tt.held {
				if v := ask(chain, a.key, a.prio, time.Second); v.Reason != guard.ReasonChangeSet {
					t.Fatalf("%s at 1s: %+v, want held for its change set", a.key, v)
				}
			}
			now := due
			switch tt.vanish {
			case "forget":
				w.Forget(dep("a/p0"))
			case "gone":
				w.Gone(dep("a/p0"))
			case "late":
				if v := ask(chain, "a/p2", 2, now); v.Reason != guard.ReasonWave {
					t.Fatalf("a/p2 admitted while a/p0, due, may still ask: %+v", v)
				}
				if next := w.Next(at(now)); !slices.Equal(next, []object.Ref{dep("a/p0")}) {
					t.Errorf("Next = %v, want a/p0 woken again", next)
				}
				now += 30 * time.Second
				w.Sweep(at(now))
				if next := w.Next(at(now)); !slices.Equal(next, []object.Ref{dep("a/p2")}) {
					t.Errorf("Next after dueGrace = %v, want a/p2", next)
				}
			}
			var started []string
			pending := slices.Clone(tt.asks)
			for round := 0; len(pending) > 0; round++ {
				if round > len(tt.asks) {
					t.Fatalf("started %v, then nothing of %v", started, pending)
				}
				var admitted string
				for _, a := range pending {
					v := ask(chain, a.key, a.prio, now)
					if !v.Hold {
						admitted = a.key
						break
					}
					if v.Reason != guard.ReasonWave {
						t.Fatalf("%s: %+v", a.key, v)
					}
				}
				if admitted == "" {
					continue
				}
				started = append(started, admitted)
				pending = slices.DeleteFunc(pending, func(a arrival) bool { return a.key == admitted })
				now += time.Second
				done(w, admitted, now)
			}
			if !slices.Equal(started, tt.want) {
				t.Errorf("started %v, want %v", started, tt.want)
			}
		})
	}
}
