package hold

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	"github.com/watcher-dev/watcher/internal/evict"
	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/store"
	"github.com/watcher-dev/watcher/internal/workload"
)

// restoreCase is the cluster a new process (a restart of watcher, a new
// leader) finds: ConfigMap shop/shared changed to a bad content, and
// workload shop/x restarted for it some time ago, not done.
type restoreCase struct {
	h     *hash.Hasher
	now   time.Time
	state func(uid string, ago time.Duration, evict bool) string
	cm    *corev1.ConfigMap
}

func newRestoreCase() restoreCase {
	h := hash.NewHasher([]byte("0123456789abcdef0123"))
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	bad := map[string][]byte{"k": []byte("bad")}
	sum := h.Of(hash.Source{Kind: "ConfigMap", Namespace: "shop", Name: "shared"}, bad).Sum
	return restoreCase{h: h, now: now,
		cm: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "shared"}, BinaryData: bad},
		state: func(uid string, ago time.Duration, evict bool) string {
			st := guard.State{At: now.Add(-ago), Generation: 2, Times: []time.Time{now.Add(-ago)}, Evict: evict,
				Sources: []guard.Source{{Object: object.Ref{Kind: "ConfigMap", Namespace: "shop", Name: "shared"}, Sum: sum}}}
			return st.Encode(uid, h.MAC)
		}}
}

// admitY asks for the restart of shop/y, another user of the bad change.
func admitY(ctx context.Context, g *Guards) bool {
	y := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "y", UID: "uy", Generation: 1}}
	p := plan.Plan{Action: plan.Restart, Changes: []plan.Change{{Ref: refs.Ref{Kind: refs.ConfigMap, Name: "shared"}}}}
	_, ok := admit(g, ctx, object.Ref{Kind: "Deployment", Namespace: "shop", Name: "y"}, y, p, func(error) {})
	return ok
}

// startStore starts st and waits for its informers.
func startStore(t *testing.T, ctx context.Context, st *store.Store) {
	t.Helper()
	go func() { _ = st.Start(ctx) }()
	if !toolscache.WaitForCacheSync(ctx.Done(), st.HasSynced) {
		t.Fatal("store did not sync")
	}
}

// TestRestoreEveryStrategy: before the first restart a new process
// admits, the rollouts watcher started are known from the cluster for
// every strategy: one in progress takes a wave slot, one past the rollout
// timeout holds the other users of the same change. A restart by eviction
// is taken as not done until the controller, which lists its pods, says
// it is (then the restarts it held go on), or the workload is marked done
// for it (then it is not tracked at all).
func TestRestoreEveryStrategy(t *testing.T) {
	for _, tc := range []struct {
		strategy string
		ago      time.Duration
		// heldY: the restart of y is held (failed rollout); running: the
		// rollouts in progress.
		heldY   bool
		running int
		// done: the workload is marked done for its restart by eviction.
		done bool
	}{
		{strategy: "annotation", ago: 20 * time.Minute, heldY: true},
		{strategy: "evict", ago: 20 * time.Minute, heldY: true},
		{strategy: "annotation", ago: 2 * time.Minute, running: 1},
		{strategy: "evict", ago: 2 * time.Minute, running: 1},
		{strategy: "evict", ago: 20 * time.Minute, done: true},
		{strategy: "evict", ago: 2 * time.Minute, done: true},
	} {
		t.Run(fmt.Sprintf("%s/%s/done=%v", tc.strategy, tc.ago, tc.done), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			rc := newRestoreCase()
			x := &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "x", UID: "ux", Generation: 2, Annotations: map[string]string{
					restart.StrategyAnnotation: tc.strategy, guard.StateAnnotation: rc.state("ux", tc.ago, tc.strategy == "evict")}},
				Spec:   appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)},
				Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 0},
			}
			if tc.done { // the mark the controller leaves on x
				x.Annotations[evict.DoneAnnotation] = evict.DoneMark(rc.now.Add(-tc.ago), "ux", rc.h.MAC)
			}
			st, err := store.New(kubefake.NewClientset(x, rc.cm), store.Options{Hasher: rc.h,
				WorkloadAnnotations: []string{restart.StrategyAnnotation, guard.StateAnnotation, evict.DoneAnnotation}})
			if err != nil {
				t.Fatal(err)
			}
			startStore(t, ctx, st)
			now := rc.now
			g := New(Config{MaxConcurrent: 10, RolloutTimeout: 10 * time.Minute, HoldOnFailure: true, Sign: rc.h.MAC,
				Now: func() time.Time { return now }}, st, events.NewFakeRecorder(100))
			if ok := admitY(ctx, g); ok == tc.heldY {
				t.Fatalf("restart of y admitted: %v, want %v", ok, !tc.heldY)
			}
			want := tc.running
			if !tc.heldY {
				want++ // y's slot
			}
			if running, _ := g.rollouts.InProgress(); running != want {
				t.Errorf("rollouts in progress (y's slot included): %d, want %d", running, want)
			}
			if tc.strategy != "evict" || !tc.heldY {
				return
			}
			// The controller lists x's pods: its evictions are done.
			cached, _ := st.Get("Deployment", "shop", "x")
			g.Evicting(ctx, object.Ref{Kind: "Deployment", Namespace: "shop", Name: "x"}, cached, false)
			now = now.Add(time.Second)
			if !admitY(ctx, g) {
				t.Error("restart of y held after the failed eviction of x was seen done")
			}
		})
	}
}

// TestRestoreKindServedLater: a failed Argo Rollout, whose informers
// start after the first restart was asked for, holds the other users of
// the same change as soon as they have synced; meanwhile restarts wait,
// and wait no longer than restoreWait for informers that never sync.
func TestRestoreKindServedLater(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rc := newRestoreCase()
	ro := &unstructured.Unstructured{}
	ro.SetGroupVersionKind(workload.Rollout.GVK)
	ro.SetNamespace("shop")
	ro.SetName("x")
	ro.SetUID("ux")
	ro.SetGeneration(2)
	ro.SetAnnotations(map[string]string{guard.StateAnnotation: rc.state("ux", 20*time.Minute, false)})
	_ = unstructured.SetNestedField(ro.Object, map[string]any{"template": map[string]any{}}, "spec")
	_ = unstructured.SetNestedField(ro.Object, map[string]any{"observedGeneration": "2", "phase": "Degraded"}, "status")
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{workload.Rollout.GVR(): "RolloutList"}, ro)
	st, err := store.New(kubefake.NewClientset(rc.cm), store.Options{Hasher: rc.h, Dynamic: dyn,
		WorkloadAnnotations: []string{guard.StateAnnotation}})
	if err != nil {
		t.Fatal(err)
	}
	startStore(t, ctx, st)
	now := rc.now
	looked := false
	g := New(Config{RolloutTimeout: 10 * time.Minute, HoldOnFailure: true, Sign: rc.h.MAC,
		Now: func() time.Time { return now }, Known: func() bool { return looked }}, st, events.NewFakeRecorder(100))
	y := object.Ref{Kind: "Deployment", Namespace: "shop", Name: "y"}

	if admitY(ctx, g) || !g.Holding(y) {
		t.Fatal("restart admitted before the optional kinds were looked up")
	}
	looked = true
	infs, err := st.Enable(ctx, workload.Rollout)
	if err != nil || len(infs) == 0 {
		t.Fatalf("enable Rollout: %d informers, %v", len(infs), err)
	}
	for _, inf := range infs {
		if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			t.Fatal("Rollout informer did not sync")
		}
	}
	if admitY(ctx, g) {
		t.Fatal("restart of y admitted: the failed Rollout x, restarted for the same change, was not restored")
	}
	if h := g.held[y]; h.reason != guard.ReasonFailedRollout {
		t.Errorf("y held for %q, want %q", h.reason, guard.ReasonFailedRollout)
	}

	// Its API goes and comes back: restored again.
	g.GoneKind(workload.Rollout.Name())
	st.Disable(workload.Rollout)
	g.Settled(ctx, y)
	if !admitY(ctx, g) {
		t.Fatal("restart of y held after Rollouts stopped being served")
	}
}

// TestRestoreWaitBounded: an optional kind that is never looked up (or
// whose informers never sync) makes restarts wait restoreWait at most.
func TestRestoreWaitBounded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rc := newRestoreCase()
	st, err := store.New(kubefake.NewClientset(rc.cm), store.Options{Hasher: rc.h})
	if err != nil {
		t.Fatal(err)
	}
	startStore(t, ctx, st)
	now := rc.now
	g := New(Config{Now: func() time.Time { return now }, Known: func() bool { return false }}, st, events.NewFakeRecorder(100))
	for _, step := range []struct {
		after time.Duration
		ok    bool
	}{{0, false}, {restoreWait / 2, false}, {restoreWait / 2, true}, {time.Second, true}} {
		now = now.Add(step.after)
		if ok := admitY(ctx, g); ok != step.ok {
			t.Errorf("after %s: admitted %v, want %v", step.after, ok, step.ok)
		}
	}
}
