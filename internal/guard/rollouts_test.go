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
					if got := w.Next(); !slices.Equal(got, o.next) && !(len(got) == 0 && len(o.next) == 0) {
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
