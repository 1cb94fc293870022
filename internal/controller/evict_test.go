package controller

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/watcher-dev/watcher/internal/evict"
	"github.com/watcher-dev/watcher/internal/plan"
)

// pdbRefusal is a PodDisruptionBudget's refusal of an eviction, as the API
// server words it (429).
var pdbRefusal = &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusTooManyRequests,
	Reason: metav1.StatusReasonTooManyRequests, Message: "Cannot evict pod as it would violate the pod's disruption budget.",
	Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: policyv1.DisruptionBudgetCause, Message: "The disruption budget web needs 1 healthy pods and has 1 currently"}}}}}

// evReconcile reconciles req as the work queue would, and returns when
// the workload's restart by eviction is looked at again: the Eviction its
// walk schedules (a Workload), or its requeue (an Eviction); 0: not
// before an event.
func evReconcile(ctx context.Context, r *Reconciler, req Request) (time.Duration, error) {
	var scheduled time.Duration
	_ = r.evictLoop.Start(ctx, afterQueue{after: func(_ Request, d time.Duration) { scheduled = d }})
	res, err := r.Reconcile(ctx, req)
	if scheduled > 0 {
		return scheduled, err
	}
	return res.RequeueAfter, err
}

// afterQueue is a work queue of which only AddAfter is used: it calls
// after.
type afterQueue struct {
	workqueue.TypedRateLimitingInterface[Request]
	after func(Request, time.Duration)
}

func (q afterQueue) AddAfter(item Request, d time.Duration) { q.after(item, d) }

// evRun reconciles the workload as the work queue would with no event
// after the first (its walk): at each look asked, an Eviction, on the
// test's clock, until none is asked or the clock reaches stop. It returns
// the times of the looks (reconciles that sent a request).
func evRun(t *testing.T, ctx context.Context, r *Reconciler, srv *evServer, clock *evClock, stop time.Time) []time.Time {
	t.Helper()
	var looks []time.Time
	var req Request = Workload{evKey}
	for clock.Now().Before(stop) {
		before := srv.total()
		after, err := evReconcile(ctx, r, req)
		if err != nil {
			t.Fatal(err)
		}
		if srv.total() > before {
			looks = append(looks, clock.Now())
		}
		if after == 0 {
			break
		}
		clock.Add(after)
		req = Eviction{evKey}
	}
	return looks
}

// TestEvictionIsNotDecided: the looks at a restart by eviction after the
// walk are Evictions, which decide nothing: one decision for the walk,
// none for the looks.
func TestEvictionIsNotDecided(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	at := time.Now().Truncate(time.Second)
	srv := newEvServer(evDeployment(1), evReplicaSet(), evPod("web-new", at.Add(30*time.Second), false), evConfigMap())
	evRestart(t, srv, at)
	clock := &evClock{t: at}
	r, _ := evReconciler(t, ctx, srv, clock.Now, 10*time.Minute)
	decisions := 0
	defer func(d func(plan.Input) plan.Plan) { decide = d }(decide)
	decide = func(in plan.Input) plan.Plan { decisions++; return plan.Decide(in) }
	looks := evRun(t, ctx, r, srv, clock, at.Add(time.Hour))
	if len(looks) < 3 || decisions != 1 {
		t.Errorf("%d looks, %d decisions: want a few looks and the walk's one decision", len(looks), decisions)
	}
}

// TestEvictBlockedIsBounded: a restart by eviction that cannot finish (its
// replacement never Ready, or a PodDisruptionBudget that allows nothing)
// is looked at with a backoff from 2 s, doubling, and not at all past the
// rollout timeout (10 min): about ten looks of at most 4 requests in all,
// then none, even after a restart of watcher; a restart of watcher within
// the timeout looks again, with backoff, until the same end; an update of
// the workload resumes it for another timeout, a creation (the first list
// of a new process) does not.
func TestEvictBlockedIsBounded(t *testing.T) {
	const timeout = 10 * time.Minute
	for _, tt := range []struct {
		name   string
		pod    func(at time.Time) *corev1.Pod
		refuse error
	}{
		{"replacement never Ready", func(at time.Time) *corev1.Pod { return evPod("web-new", at.Add(30*time.Second), false) }, nil},
		{"PDB allows nothing", func(at time.Time) *corev1.Pod { return evPod("web-old", at.Add(-time.Hour), true) }, pdbRefusal},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			at := time.Now().Truncate(time.Second)
			srv := newEvServer(evDeployment(1), evReplicaSet(), tt.pod(at), evConfigMap())
			srv.refuse = func(call string) error {
				if call == "create eviction" {
					return tt.refuse
				}
				return nil
			}
			evRestart(t, srv, at)
			srv.calls = nil
			clock := &evClock{t: at}
			r, _ := evReconciler(t, ctx, srv, clock.Now, timeout)

			looks := evRun(t, ctx, r, srv, clock, at.Add(time.Hour))
			perLook := float64(srv.total()) / float64(len(looks))
			t.Logf("looks at %v; %d requests", since(at, looks), srv.total())
			if len(looks) > 12 || perLook > 4 {
				t.Errorf("%d looks, %.1f requests each, in %s: want at most 12 of at most 4", len(looks), perLook, timeout)
			}
			if last := looks[len(looks)-1]; !last.Before(at.Add(timeout)) {
				t.Errorf("looked at %s, past the rollout timeout", last.Sub(at))
			}
			for i := 2; i < len(looks); i++ {
				if gap, prev := looks[i].Sub(looks[i-1]), looks[i-1].Sub(looks[i-2]); gap < 2*prev && gap < evict.MaxLook {
					t.Errorf("look %d: %s after the last, the one before %s after its own: no backoff", i, gap, prev)
				}
			}

			// A new process, or a new leader, past the timeout: no request.
			clock.Add(time.Hour)
			r2, _ := evReconciler(t, ctx, srv, clock.Now, timeout)
			before := srv.total()
			if after, _ := evReconcile(ctx, r2, Workload{evKey}); after != 0 || srv.total() != before {
				t.Errorf("restarted past the timeout: requeue %v, %d requests", after, srv.total()-before)
			}
			// A creation event (its first list) resumes nothing.
			dep := &appsv1.Deployment{}
			_ = srv.raw.Get(ctx, client.ObjectKey{Namespace: evNS, Name: "web"}, dep)
			h := r2.touching("Deployment", handler.TypedFuncs[client.Object, Request]{})
			h.Create(ctx, event.TypedCreateEvent[client.Object]{Object: dep}, nil)
			if after, _ := evReconcile(ctx, r2, Workload{evKey}); after != 0 || srv.total() != before {
				t.Errorf("after a creation event: requeue %v, %d requests", after, srv.total()-before)
			}
			// An update of the workload resumes it for another timeout.
			h.Update(ctx, event.TypedUpdateEvent[client.Object]{ObjectOld: dep, ObjectNew: dep}, nil)
			resumed := clock.Now()
			looks = evRun(t, ctx, r2, srv, clock, resumed.Add(time.Hour))
			if len(looks) == 0 || !looks[0].Equal(resumed) || len(looks) > 12 || !looks[len(looks)-1].Before(resumed.Add(timeout)) {
				t.Errorf("resumed at %s: looks at %v, want one at once, then at most 11 within %s", resumed.Sub(at), since(resumed, looks), timeout)
			}

			// A new process within the timeout looks again, up to the same end.
			clock.t = at.Add(5 * time.Minute)
			r3, _ := evReconciler(t, ctx, srv, clock.Now, timeout)
			looks = evRun(t, ctx, r3, srv, clock, at.Add(time.Hour))
			if len(looks) == 0 || len(looks) > 10 || !looks[len(looks)-1].Before(at.Add(timeout)) {
				t.Errorf("restarted 5 min into the restart: looks at %v, want a few, none past %s", since(at, looks), timeout)
			}
		})
	}
}

// since returns the times ts as durations after t0.
func since(t0 time.Time, ts []time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, t := range ts {
		out[i] = t.Sub(t0)
	}
	return out
}

// TestEvictServerClock: which pods are old is decided by the API server's
// time of the restart's write (its managedFields), never by watcher's own
// clock: one an hour ahead, or behind, neither evicts a replacement again
// nor leaves an old pod.
func TestEvictServerClock(t *testing.T) {
	for _, tt := range []struct {
		name    string
		skew    time.Duration
		pod     func(server time.Time) *corev1.Pod
		evicted int
	}{
		{"watcher ahead: a replacement starting is not evicted again", time.Hour,
			func(server time.Time) *corev1.Pod { return evPod("web-new", server.Add(30*time.Second), false) }, 0},
		{"watcher behind: an old pod is evicted", -time.Hour,
			func(server time.Time) *corev1.Pod { return evPod("web-old", server.Add(-10*time.Minute), true) }, 1},
		{"on time: an old pod is evicted", 0,
			func(server time.Time) *corev1.Pod { return evPod("web-old", server.Add(-10*time.Minute), true) }, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			server := time.Now().Truncate(time.Second)
			srv := newEvServer(evDeployment(1), evReplicaSet(), tt.pod(server), evConfigMap())
			watcher := &evClock{t: server.Add(tt.skew)}
			evRestart(t, srv, watcher.Now())
			r, _ := evReconciler(t, ctx, srv, watcher.Now, 10*time.Minute)
			if _, err := r.Reconcile(ctx, Workload{evKey}); err != nil {
				t.Fatal(err)
			}
			if got := srv.calls["create eviction"]; got != tt.evicted {
				t.Errorf("%d evictions, want %d", got, tt.evicted)
			}
		})
	}
}

// TestEvictForbidden: without the right to list the pods or to evict
// them, the restart says so on the workload, in one Warning Event naming
// the right, however many events of the workload come, and asks the API
// server nothing more until one does.
func TestEvictForbidden(t *testing.T) {
	for _, tt := range []struct {
		call, right string
	}{
		{"list PodList", "list pods in namespace tenant-a"},
		{"list ReplicaSetList", "list replicasets in namespace tenant-a"},
		{"create eviction", "create pods/eviction in namespace tenant-a"},
	} {
		t.Run(tt.call, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			at := time.Now().Truncate(time.Second)
			srv := newEvServer(evDeployment(1), evReplicaSet(), evPod("web-old", at.Add(-time.Hour), true), evConfigMap())
			srv.refuse = func(call string) error {
				if call == tt.call {
					return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("RBAC: access denied"))
				}
				return nil
			}
			evRestart(t, srv, at)
			clock := &evClock{t: at}
			r, rec := evReconciler(t, ctx, srv, clock.Now, 10*time.Minute)
			for i := range 3 {
				after, err := evReconcile(ctx, r, Workload{evKey})
				if err != nil || after != 0 {
					t.Errorf("reconcile %d: requeue %v, error %v: want neither", i, after, err)
				}
				clock.Add(time.Minute)
				before := srv.total()
				if after, _ := evReconcile(ctx, r, Eviction{evKey}); after != 0 || srv.total() != before {
					t.Errorf("reconcile %d without an event: requeue %v, %d requests", i, after, srv.total()-before)
				}
				r.evictions.Tracker.Touch(evKey) // an event of the workload: looked at again
			}
			var warnings []string
			for len(rec.Events) > 0 {
				if e := <-rec.Events; strings.Contains(e, ReasonEvictionForbidden) {
					warnings = append(warnings, e)
				}
			}
			if len(warnings) != 1 || !strings.Contains(warnings[0], "Warning") || !strings.Contains(warnings[0], tt.right) {
				t.Errorf("events %q: want one Warning naming %q", warnings, tt.right)
			}
		})
	}
}

// TestEvictDoneMarked: a restart seen done is marked on the workload, once,
// so that a new process knows it from its cache: no request, even past
// the rollout timeout, and no failed rollout.
func TestEvictDoneMarked(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	at := time.Now().Truncate(time.Second)
	srv := newEvServer(evDeployment(1), evReplicaSet(), evPod("web-new", at.Add(time.Second), true), evConfigMap())
	evRestart(t, srv, at)
	srv.calls = nil
	clock := &evClock{t: at.Add(time.Minute)}
	r, _ := evReconciler(t, ctx, srv, clock.Now, 10*time.Minute)
	for range 2 {
		if after, err := evReconcile(ctx, r, Workload{evKey}); err != nil || after != 0 {
			t.Fatalf("requeue %v, error %v", after, err)
		}
	}
	if srv.calls["patch Deployment"] != 1 {
		t.Errorf("%d patches, want the one mark", srv.calls["patch Deployment"])
	}
	dep := &appsv1.Deployment{}
	_ = srv.raw.Get(ctx, client.ObjectKey{Namespace: evNS, Name: "web"}, dep)
	if !evict.IsDone(dep.Annotations, at, string(dep.UID), evHasher.MAC) {
		t.Fatalf("not marked done: %v", dep.Annotations)
	}
	for _, d := range []time.Duration{time.Minute, time.Hour} {
		clock.t = at.Add(d)
		r2, rec := evReconciler(t, ctx, srv, clock.Now, 10*time.Minute)
		before := srv.total()
		if after, _ := evReconcile(ctx, r2, Workload{evKey}); after != 0 || srv.total() != before || len(rec.Events) != 0 {
			t.Errorf("a new process %s after: requeue %v, %d requests, %d events", d, after, srv.total()-before, len(rec.Events))
		}
	}
}
