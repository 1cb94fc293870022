package evict_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/watcher-dev/watcher/internal/evict"
)

var at = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// pod is a pod created d after the restart (before it if d < 0).
func pod(name string, d time.Duration, ready bool) evict.Pod {
	return evict.Pod{Name: name, Created: at.Add(d), Ready: ready, Ordinal: -1}
}

func terminating(p evict.Pod) evict.Pod { p.Terminating = true; return p }

func ord(p evict.Pod, n int, node string) evict.Pod { p.Ordinal, p.Node = n, node; return p }

// TestNext: one row per line of Next's table, and the walk of a whole
// restart of three pods with an allowance of one.
func TestNext(t *testing.T) {
	old := -time.Hour
	tests := []struct {
		name string
		in   evict.Input
		want evict.Decision
	}{
		{"no pods, none wanted: done", evict.Input{At: at}, evict.Decision{Done: true}},
		{"all replaced and Ready: done",
			evict.Input{At: at, Want: 2, Allowance: 1, Pods: []evict.Pod{pod("a", time.Second, true), pod("b", 0, true)}},
			evict.Decision{Done: true}},
		{"all replaced, one not Ready yet: wait",
			evict.Input{At: at, Want: 2, Allowance: 1, Pods: []evict.Pod{pod("a", time.Second, true), pod("b", time.Second, false)}},
			evict.Decision{}},
		{"all replaced, one missing: wait",
			evict.Input{At: at, Want: 2, Allowance: 1, Pods: []evict.Pod{pod("a", time.Second, true)}},
			evict.Decision{}},
		{"three old, allowance 1: the oldest",
			evict.Input{At: at, Want: 3, Allowance: 1, Pods: []evict.Pod{pod("a", 2*old, true), pod("b", 3*old, true), pod("c", old, true)}},
			evict.Decision{Evict: []string{"b"}, Old: 3}},
		{"three old, allowance 2: the two oldest",
			evict.Input{At: at, Want: 3, Allowance: 2, Pods: []evict.Pod{pod("a", 2*old, true), pod("b", 3*old, true), pod("c", old, true)}},
			evict.Decision{Evict: []string{"b", "a"}, Old: 3}},
		{"allowance 0 counts as 1",
			evict.Input{At: at, Want: 2, Pods: []evict.Pod{pod("a", old, true), pod("b", old, true)}},
			evict.Decision{Evict: []string{"a"}, Old: 2}},
		{"one evicted, terminating, its replacement not Ready: wait",
			evict.Input{At: at, Want: 3, Allowance: 1, Pods: []evict.Pod{pod("a", old, true), pod("b", old, true), terminating(pod("c", old, true)), pod("d", time.Second, false)}},
			evict.Decision{Old: 3}},
		{"replacement Ready, evicted pod still terminating: the next",
			evict.Input{At: at, Want: 3, Allowance: 1, Pods: []evict.Pod{pod("a", old, true), pod("b", old, true), terminating(pod("c", old, false)), pod("d", time.Second, true)}},
			evict.Decision{Evict: []string{"a"}, Old: 3}},
		{"a pod missing uses the allowance: wait",
			evict.Input{At: at, Want: 3, Allowance: 1, Pods: []evict.Pod{pod("a", old, true), pod("b", old, true)}},
			evict.Decision{Old: 2}},
		{"an old pod not Ready is evicted whatever the allowance, first",
			evict.Input{At: at, Want: 3, Allowance: 1, Pods: []evict.Pod{pod("a", old, true), pod("b", old, false), pod("c", 2*old, true)}},
			evict.Decision{Evict: []string{"b"}, Old: 3}},
		{"a pod created in the restart's second is a replacement",
			evict.Input{At: at, Want: 1, Allowance: 1, Pods: []evict.Pod{pod("a", 0, true)}},
			evict.Decision{Done: true}},
		{"only terminating old pods left: not done, nothing to evict",
			evict.Input{At: at, Want: 1, Allowance: 1, Pods: []evict.Pod{terminating(pod("a", old, true)), pod("b", time.Second, true)}},
			evict.Decision{Old: 1}},
		{"StatefulSet: highest ordinal first",
			evict.Input{At: at, Want: 3, Allowance: 1, Order: evict.HighestOrdinal, Pods: []evict.Pod{
				ord(pod("db-2", old, true), 2, ""), ord(pod("db-10", 2*old, true), 10, ""), ord(pod("db-0", 3*old, true), 0, "")}},
			evict.Decision{Evict: []string{"db-10"}, Old: 3}},
		{"StatefulSet: the highest left once the replacement is Ready",
			evict.Input{At: at, Want: 3, Allowance: 1, Order: evict.HighestOrdinal, Pods: []evict.Pod{
				ord(pod("db-2", time.Second, true), 2, ""), ord(pod("db-1", old, true), 1, ""), ord(pod("db-0", old, true), 0, "")}},
			evict.Decision{Evict: []string{"db-1"}, Old: 2}},
		{"DaemonSet: node by node",
			evict.Input{At: at, Want: 3, Allowance: 1, Order: evict.ByNode, Pods: []evict.Pod{
				ord(pod("x", 3*old, true), -1, "n3"), ord(pod("y", old, true), -1, "n1"), ord(pod("z", 2*old, true), -1, "n2")}},
			evict.Decision{Evict: []string{"y"}, Old: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, evict.Next(tt.in)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestNextWalk runs a whole restart the way the cluster answers: each
// evicted pod is replaced by one not Ready, which becomes Ready at the next
// step. Every pod is evicted exactly once, never more than the allowance is
// unavailable, and the restart ends done.
func TestNextWalk(t *testing.T) {
	for _, allowance := range []int{1, 2} {
		pods := []evict.Pod{pod("a", -3*time.Hour, true), pod("b", -2*time.Hour, true), pod("c", -time.Hour, true), pod("d", -time.Hour, true)}
		evicted := map[string]int{}
		done := false
		for step := 0; step < 20 && !done; step++ {
			// Replacements become Ready, terminating pods go.
			var next []evict.Pod
			for _, p := range pods {
				if p.Terminating {
					continue
				}
				p.Ready = true
				next = append(next, p)
			}
			pods = next
			d := evict.Next(evict.Input{At: at, Want: 4, Allowance: allowance, Pods: pods})
			done = d.Done
			if len(d.Evict) > allowance {
				t.Fatalf("allowance %d, step %d: evicts %v", allowance, step, d.Evict)
			}
			for _, name := range d.Evict {
				evicted[name]++
				for i := range pods {
					if pods[i].Name == name {
						pods[i].Terminating = true
					}
				}
				pods = append(pods, pod(name+"'", time.Duration(step+1)*time.Second, false))
			}
		}
		if !done {
			t.Fatalf("allowance %d: not done after 20 steps: %v", allowance, pods)
		}
		if diff := cmp.Diff(map[string]int{"a": 1, "b": 1, "c": 1, "d": 1}, evicted); diff != "" {
			t.Errorf("allowance %d: evictions (-want +got):\n%s", allowance, diff)
		}
	}
}
