package policy

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/slim"
)

// manyPolicies returns an index of n policies of namespace ns, each
// of targets targets: one by name (w-<i>; p0 and p1 target "web"), the
// others by one of 26 selectors, none of which selects web.
func manyPolicies(ns string, n, targets int) *Index {
	ix := NewIndex()
	for i := range n {
		name := "w-" + strconv.Itoa(i)
		if i < 2 {
			name = "web"
		}
		ts := []Target{{Kind: "Deployment", Name: name}}
		for j := 1; j < targets; j++ {
			sel, _ := selector(&metav1.LabelSelector{MatchLabels: map[string]string{"app": "x", "tier": string(rune('a' + j%26))}})
			ts = append(ts, Target{Kind: "Deployment", Selector: sel})
		}
		ix.Set(&Policy{Namespace: ns, Name: "p" + strconv.Itoa(i), Targets: ts,
			Sources: []Source{{Kind: refs.ConfigMap, Name: "cfg-" + strconv.Itoa(i)}}})
	}
	return ix
}

// event returns what one workload event costs in the transform of the
// store (slim.Workload, then References.Annotate): the Deployment web of
// team-a, its labels new each time when fresh (no cached answer).
func event(ix *Index, fresh bool) func(i int) {
	transform := slim.Workload(logr.Discard())
	annotate := References{Index: ix}.Annotate
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", Labels: map[string]string{"app": "web", "rev": "0"}},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "env"}}}},
		}}}}},
	}
	return func(i int) {
		if fresh {
			d.Labels["rev"] = strconv.Itoa(i)
		}
		out, _ := transform(d)
		annotate(out.(*metav1.PartialObjectMetadata))
	}
}

// BenchmarkWorkloadEvent: the transform of one workload event of team-a,
// with no policy at all, with 2,000 policies of 100 targets in another
// namespace (the same heap: what watcher's garbage collector sees), and
// with them in team-a; its labels seen before (cached) or new.
func BenchmarkWorkloadEvent(b *testing.B) {
	for _, c := range []struct {
		name string
		ix   *Index
	}{
		{"none", NewIndex()},
		{"2000-elsewhere", manyPolicies("team-b", 2000, 100)},
		{"2000", manyPolicies("team-a", 2000, 100)},
	} {
		for _, fresh := range []bool{false, true} {
			ix := c.ix
			b.Run(fmt.Sprintf("policies=%s/newLabels=%v", c.name, fresh), func(b *testing.B) {
				ev := event(ix, fresh)
				for i := 0; b.Loop(); i++ {
					ev(i)
				}
			})
		}
	}
}

// TestManyPoliciesCostLittle: a workload event (the store's transform) in
// a namespace of 2,000 policies of 100 targets each, two of which target
// it, costs less than twice what it costs when they are in another
// namespace: a status update (labels seen before), and a change of its
// labels (no cached answer; logged, not asserted: its cost is the few
// distinct selectors of the namespace, 26 here). (Against an empty index the garbage collector
// differs too: a heap without the policies is marked for free; watcher's
// heap holds its caches anyway.) The best of several rounds is compared,
// so that other work on the machine does not decide.
func TestManyPoliciesCostLittle(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("measures: not with -short or -race")
	}
	best := func(ev func(int)) time.Duration {
		const events = 2000
		var out time.Duration
		for round := range 7 {
			runtime.GC()
			start := time.Now()
			for i := range events {
				ev(round*events + i)
			}
			if d := time.Since(start) / events; round == 0 || d < out {
				out = d
			}
		}
		return out
	}
	empty := best(event(NewIndex(), false))
	ix := manyPolicies("team-b", 2000, 100)
	none, noneNew := best(event(ix, false)), best(event(ix, true))
	for i := range 2000 {
		p := ix.Get("team-b", "p"+strconv.Itoa(i))
		q := *p
		q.Namespace = "team-a"
		ix.Set(&q)
	}
	many, manyNew := best(event(ix, false)), best(event(ix, true))
	t.Logf("one workload event of team-a: %s with no policy at all; with 2,000 policies of 100 targets in team-b %s, in team-a %s (%.2fx); "+
		"labels new each time: %s, %s (%.2fx)",
		empty, none, many, float64(many)/float64(none), noneNew, manyNew, float64(manyNew)/float64(noneNew))
	if many > 2*none {
		t.Errorf("2,000 policies make a workload event cost %s, %.1fx the %s with none in its namespace", many, float64(many)/float64(none), none)
	}
}
