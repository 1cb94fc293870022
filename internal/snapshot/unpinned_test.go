package snapshot

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/pin"
)

var t0 = time.Date(2026, 12, 7, 20, 0, 0, 0, time.UTC)

// at is t0 plus s seconds.
func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

// TestReplace states the decision of replace, row by row of its doc
// comment. Pods a.. are of the revision looked at, o.. of another
// revision of its workload, x.. of another workload.
func TestReplace(t *testing.T) {
	rev := func(name string, s int) podFacts {
		return podFacts{name: name, created: at(s), pinned: true, ready: true, ofRevision: true, ofWorkload: true}
	}
	marked := func(p podFacts) podFacts { p.admitted = true; return p }
	other := func(name string, s int) podFacts { p := rev(name, s); p.ofRevision = false; return p }
	foreign := func(name string, s int) podFacts { p := other(name, s); p.ofWorkload = false; return p }
	gone := func(p podFacts) podFacts { p.terminating = true; return p }
	starting := func(p podFacts) podFacts { p.ready = false; return p }
	now := at(60)
	for _, tc := range []struct {
		name string
		pods []podFacts
		now  time.Time
		want replacement
	}{
		{"all marked: nothing", []podFacts{marked(rev("a1", 0)), marked(rev("a2", 5))}, now,
			replacement{}},
		{"none marked since (the policy missing): left, reported", []podFacts{rev("a1", 0), rev("a2", 5), marked(other("o1", -100))}, now,
			replacement{unpinned: []string{"a1", "a2"}}},
		{"a pod marked later (the policy in force since): the oldest unpinned evicted", []podFacts{rev("a2", 3), rev("a1", 0), marked(rev("a3", 5))}, now,
			replacement{unpinned: []string{"a1", "a2"}, proven: 2, evict: "a1", again: true}},
		{"marked in the same second: proven (creation times are to the second)", []podFacts{rev("a1", 5), marked(rev("a2", 5))}, now,
			replacement{unpinned: []string{"a1"}, proven: 1, evict: "a1", again: true}},
		{"the proof may be another workload's pod", []podFacts{rev("a1", 0), marked(foreign("x1", 30))}, now,
			replacement{unpinned: []string{"a1"}, proven: 1, evict: "a1", again: true}},
		{"only those up before the mark are proven", []podFacts{rev("a1", 0), marked(rev("a2", 5)), rev("a3", 10)}, now,
			replacement{unpinned: []string{"a1", "a3"}, proven: 1, evict: "a1", again: true}},
		{"a pod of the workload terminating: wait", []podFacts{rev("a1", 0), marked(rev("a2", 5)), gone(rev("a0", -10))}, now,
			replacement{unpinned: []string{"a1"}, proven: 1, again: true}},
		{"a replacement starting, in another revision: wait", []podFacts{rev("a1", 0), starting(marked(other("o1", 50)))}, now,
			replacement{unpinned: []string{"a1"}, proven: 1, again: true}},
		{"another workload's pods do not hold it", []podFacts{rev("a1", 0), gone(starting(marked(foreign("x1", 50))))}, now,
			replacement{unpinned: []string{"a1"}, proven: 1, evict: "a1", again: true}},
		{"an unpinned pod not Ready does not hold it", []podFacts{starting(rev("a1", 0)), marked(rev("a2", 5))}, now,
			replacement{unpinned: []string{"a1"}, proven: 1, evict: "a1", again: true}},
		{"a terminating unpinned pod is no longer counted, and holds the next", []podFacts{gone(rev("a1", 0)), rev("a2", 1), marked(rev("a3", 5))}, now,
			replacement{unpinned: []string{"a2"}, proven: 1, again: true}},
		{"waiting with no newer pod for replaceFor: given up", []podFacts{rev("a1", 0), marked(rev("a2", 5)), gone(rev("a0", -10))}, at(5).Add(replaceFor),
			replacement{unpinned: []string{"a1"}, proven: 1, stale: true}},
		{"settled, however old: evicted (a look after watcher restarts)", []podFacts{rev("a1", 0), marked(rev("a2", 5))}, at(5).Add(2 * replaceFor),
			replacement{unpinned: []string{"a1"}, proven: 1, evict: "a1", again: true, stale: true}},
		{"a pod without pins is not unpinned", []podFacts{{name: "a1", created: at(0), ofRevision: true, ofWorkload: true}, marked(rev("a2", 5))}, now,
			replacement{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := replace(tc.pods, tc.now); !equalReplacement(got, tc.want) {
				t.Errorf("replace = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func equalReplacement(a, b replacement) bool {
	return slices.Equal(a.unpinned, b.unpinned) && a.proven == b.proven && a.evict == b.evict && a.again == b.again && a.stale == b.stale
}

// pinnedPod is a pod of the revision hash h of the workload, created
// s seconds after t0, Ready; marked: admitted by the policy.
func pinnedPod(name, h string, s int, marked bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name),
		CreationTimestamp: metav1.NewTime(time.Now().Add(time.Duration(s) * time.Second)),
		Labels:            map[string]string{pin.PinnedLabel: "true", rolloutsHashLabel: h},
		Annotations:       map[string]string{pin.PinsAnnotation: "configmap/cfg=cfg-pin-00000000000000000000"}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	if marked {
		p.Annotations[pin.Admitted] = "true"
	}
	return p
}

// replacing is a revision (Argo hash h2) of Rollout own whose pods are
// looked at by Owners over a fake client (c) that refuses evictions with
// refuse, if set.
type replacing struct {
	o   *Owners
	c   client.Client
	rec *events.FakeRecorder
	r   revision
}

func newReplacing(t *testing.T, refuse error, pods ...client.Object) *replacing {
	t.Helper()
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(pods...).Build(), interceptor.Funcs{
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, o ...client.SubResourceCreateOption) error {
			if _, ok := subObj.(*policyv1.Eviction); !ok || sub != "eviction" {
				t.Errorf("create %s %T", sub, subObj)
			}
			if refuse != nil {
				return refuse
			}
			return c.SubResource(sub).Create(ctx, obj, subObj, o...)
		},
	})
	rec := events.NewFakeRecorder(20)
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[revision]())
	t.Cleanup(q.ShutDown)
	o := &Owners{Client: c, Fresh: c, Log: logr.Discard(), Recorder: rec, CheckAfter: time.Millisecond, q: q}
	r := revision{resource: "pods", namespace: "ns", name: "own-h2", pods: rolloutsHashLabel + "=h2",
		workload: metav1.OwnerReference{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: "own", UID: "own"}}
	return &replacing{o: o, c: c, rec: rec, r: r}
}

// look looks at the revision once and returns whether it is to be looked
// at again, and the Events said.
func (s *replacing) look(t *testing.T) (bool, []string) {
	t.Helper()
	if err := s.o.unpinned(context.Background(), s.r); err != nil {
		t.Fatal(err)
	}
	var said []string
	for len(s.rec.Events) > 0 {
		said = append(said, <-s.rec.Events)
	}
	again := false
	deadline := time.Now().Add(time.Second)
	for s.o.q.Len() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if s.o.q.Len() > 0 {
		r, _ := s.o.q.Get()
		s.o.q.Done(r)
		again = r == s.r
	}
	return again, said
}

func (s *replacing) pods(t *testing.T) []string {
	t.Helper()
	var list corev1.PodList
	if err := s.c.List(context.Background(), &list, client.InNamespace("ns")); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names
}

// TestUnpinnedReplaced: of a revision whose first pod came up before the
// policy was in force and whose second was marked, watcher evicts the
// first (Normal UnpinnedPodReplaced, Warning PodsUnpinned, counted once)
// and looks again; the replacement marked, nothing more is done or said.
func TestUnpinnedReplaced(t *testing.T) {
	s := newReplacing(t, nil, pinnedPod("own-h2-a", "h2", -20, false), pinnedPod("own-h2-b", "h2", -10, true),
		pinnedPod("other-x", "hx", -5, false)) // another revision's: not this look's
	before := testutil.ToFloat64(metrics.UnpinnedPods)
	again, said := s.look(t)
	if !again {
		t.Error("not looked at again after an eviction")
	}
	if got := s.pods(t); !slices.Equal(got, []string{"other-x", "own-h2-b"}) {
		t.Errorf("pods after the look: %v, want own-h2-a evicted", got)
	}
	if len(said) != 2 || !strings.Contains(said[0], "Normal "+ReasonUnpinnedPodReplaced+" Evicted pod own-h2-a of revision own-h2") ||
		!strings.Contains(said[1], "Warning "+ReasonPodsUnpinned+" 1 pods of revision own-h2 came up unpinned") || !strings.Contains(said[1], "replacing them one at a time") {
		t.Errorf("Events: %q", said)
	}
	if got := testutil.ToFloat64(metrics.UnpinnedPods) - before; got != 1 {
		t.Errorf("watcher_unpinned_pods_total grew by %v, want 1", got)
	}

	// The ReplicaSet re-creates it; the policy marks it.
	if err := s.c.Create(context.Background(), pinnedPod("own-h2-c", "h2", 0, true)); err != nil {
		t.Fatal(err)
	}
	again, said = s.look(t)
	if again || len(said) != 0 {
		t.Errorf("after the replacement: again %v, Events %q; want neither", again, said)
	}
	if got := testutil.ToFloat64(metrics.UnpinnedPods) - before; got != 1 {
		t.Errorf("watcher_unpinned_pods_total grew by %v, want 1 (each pod once)", got)
	}
}

// TestUnpinnedOneAtATime: two pods up unpinned; the first is evicted and,
// while it terminates, the second waits (looked at again, nothing said);
// once the first is gone and its replacement Ready, the second goes.
func TestUnpinnedOneAtATime(t *testing.T) {
	a, b := pinnedPod("own-h2-a", "h2", -30, false), pinnedPod("own-h2-b", "h2", -20, false)
	s := newReplacing(t, nil, a, b, pinnedPod("own-h2-c", "h2", -10, true))
	if again, _ := s.look(t); !again {
		t.Fatal("not looked at again")
	}
	if got := s.pods(t); !slices.Equal(got, []string{"own-h2-b", "own-h2-c"}) {
		t.Fatalf("pods: %v, want own-h2-a evicted first (the oldest)", got)
	}
	// own-h2-a's replacement is starting.
	d := pinnedPod("own-h2-d", "h2", 0, true)
	d.Status.Conditions[0].Status = corev1.ConditionFalse
	if err := s.c.Create(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	again, said := s.look(t)
	if !again || len(said) != 0 || !slices.Contains(s.pods(t), "own-h2-b") {
		t.Errorf("while a replacement starts: again %v, Events %q, pods %v; want a wait, silent", again, said, s.pods(t))
	}
	d.Status.Conditions[0].Status = corev1.ConditionTrue
	if err := s.c.Status().Update(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if again, _ := s.look(t); !again || slices.Contains(s.pods(t), "own-h2-b") {
		t.Errorf("once it is Ready: again %v, pods %v; want own-h2-b evicted", again, s.pods(t))
	}
}

// TestUnpinnedNotReplaced: the pods are reported and left, not looked at
// again, when no pod marked since shows the policy in force (the binding
// deleted), when watcher may not evict, and, looked at again, while a
// PodDisruptionBudget refuses.
func TestUnpinnedNotReplaced(t *testing.T) {
	gr := corev1.Resource("pods")
	pdb := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	for _, tc := range []struct {
		name      string
		refuse    error
		marked    bool // a pod marked after the unpinned one
		again     bool
		say, left string
	}{
		{"no pod marked since", nil, false, false, "left as they are: no pod marked since", "own-h2-a"},
		{"forbidden", apierrors.NewForbidden(gr, "own-h2-a", nil), true, false, "left as they are: watcher may not evict pods (create pods/eviction in namespace ns)", "own-h2-a"},
		{"a budget refuses", pdb, true, true, "the next waits: a PodDisruptionBudget allows no disruption now", "own-h2-a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newReplacing(t, tc.refuse, pinnedPod("own-h2-a", "h2", -20, false), pinnedPod("own-h2-b", "h2", -30, true))
			if tc.marked {
				if err := s.c.Create(context.Background(), pinnedPod("own-h2-c", "h2", -10, true)); err != nil {
					t.Fatal(err)
				}
			}
			before := testutil.ToFloat64(metrics.UnpinnedPods)
			again, said := s.look(t)
			if again != tc.again {
				t.Errorf("looked at again: %v, want %v", again, tc.again)
			}
			if len(said) != 1 || !strings.Contains(said[0], "Warning "+ReasonPodsUnpinned+" 1 pods of revision own-h2 came up unpinned") || !strings.Contains(said[0], tc.say) {
				t.Errorf("Events: %q, want one saying %q", said, tc.say)
			}
			if !slices.Contains(s.pods(t), tc.left) {
				t.Errorf("pods %v: %s evicted", s.pods(t), tc.left)
			}
			want := 1.0 // left at the last look
			if tc.again {
				want = 0 // counted when evicted or left at last
			}
			if got := testutil.ToFloat64(metrics.UnpinnedPods) - before; got != want {
				t.Errorf("watcher_unpinned_pods_total grew by %v, want %v", got, want)
			}
		})
	}
}
