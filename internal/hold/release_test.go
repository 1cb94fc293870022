package hold

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"

	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/store"
)

// testStore is a store of the ConfigMaps cms, on a fake clientset.
func testStore(t *testing.T, ctx context.Context, cs *kubefake.Clientset) *store.Store {
	t.Helper()
	st, err := store.New(cs, store.Options{Hasher: hash.NewHasher([]byte("0123456789abcdef0123")), ConfigAnnotations: []string{guard.ReleaseAnnotation}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = st.Start(ctx) }()
	if !toolscache.WaitForCacheSync(ctx.Done(), st.HasSynced) {
		t.Fatal("store did not sync")
	}
	return st
}

// TestReleaseOnlyByAPerson: a budget hold is released when one of the
// objects of the hold gets a new non-empty watcher.dev/release-held, and
// never because another ConfigMap of the workload changed too.
func TestReleaseOnlyByAPerson(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := kubefake.NewClientset()
	for _, n := range []string{"a", "b"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: n}, Data: map[string]string{"k": "v"}}
		if _, err := cs.CoreV1().ConfigMaps("shop").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	st := testStore(t, ctx, cs)
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	g := New(Config{Budget: 1, BudgetWindow: time.Hour, Now: func() time.Time { return now }}, st, events.NewFakeRecorder(100))
	key := object.Ref{Kind: "Deployment", Namespace: "shop", Name: "web"}
	obj := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	change := func(names ...string) plan.Plan {
		p := plan.Plan{Action: plan.Restart}
		for _, n := range names {
			p.Changes = append(p.Changes, plan.Change{Ref: refs.Ref{Kind: refs.ConfigMap, Name: n}})
		}
		return p
	}
	req, ok := admit(g, ctx, key, obj, change("a"), func(error) {})
	if !ok {
		t.Fatal("first restart held")
	}
	g.Done(ctx, key, obj, req, nil)
	now = now.Add(time.Minute)
	if _, ok := admit(g, ctx, key, obj, change("a"), func(error) {}); ok {
		t.Fatal("second restart within the budget admitted")
	}
	now = now.Add(time.Minute)
	if _, ok := admit(g, ctx, key, obj, change("a", "b"), func(error) {}); ok {
		t.Error("another ConfigMap changing released the budget hold")
	}
	if _, ok := admit(g, ctx, key, obj, change("b"), func(error) {}); ok {
		t.Error("one ConfigMap fewer released the budget hold")
	}
	// A person releases it on ConfigMap a.
	cm, _ := cs.CoreV1().ConfigMaps("shop").Get(ctx, "a", metav1.GetOptions{})
	cm.Annotations = map[string]string{guard.ReleaseAnnotation: "1"}
	if _, err := cs.CoreV1().ConfigMaps("shop").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if o, _ := st.Get("ConfigMap", "shop", "a"); o != nil && o.GetAnnotations()[guard.ReleaseAnnotation] == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("store never saw the annotation")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, ok := admit(g, ctx, key, obj, change("a", "b"), func(error) {}); !ok {
		t.Error("released by a person on ConfigMap a, still held")
	}
}

// TestStateWrittenAndRead: the state written with a restart is what the
// next replica reads back: its budget counts the restart.
func TestStateWrittenAndRead(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	h := hash.NewHasher([]byte("0123456789abcdef0123"))
	cfg := Config{Budget: 1, BudgetWindow: time.Hour, Sign: h.MAC, Now: func() time.Time { return now }}
	key := object.Ref{Kind: "Deployment", Namespace: "shop", Name: "web"}
	obj := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "u1", Generation: 3}}
	g := New(cfg, nil, events.NewFakeRecorder(10))
	req, ok := admit(g, ctx, key, obj, plan.Plan{Action: plan.Restart}, func(error) {})
	if !ok {
		t.Fatal("held")
	}
	obj.Annotations = map[string]string{guard.StateAnnotation: g.State(req, obj)}
	obj.Generation = 4
	now = now.Add(time.Minute)
	other := New(cfg, nil, events.NewFakeRecorder(10)) // another replica, or after a restart
	if _, ok := admit(other, ctx, key, obj, plan.Plan{Action: plan.Restart}, func(error) {}); ok {
		t.Error("the new replica's budget forgot the restart written by the old one")
	}
	copyObj := obj.DeepCopy()
	copyObj.UID, copyObj.Name = "u2", "copy"
	if _, ok := New(cfg, nil, events.NewFakeRecorder(10)).Admit(ctx, object.Ref{Kind: "Deployment", Namespace: "shop", Name: "copy"}, copyObj, plan.Plan{Action: plan.Restart}, Facts{}, func(error) {}); !ok {
		t.Error("a copy of the state counted on another workload")
	}
}

// TestReleaseWakesOnlyItsHolds: a new watcher.dev/release-held on a
// ConfigMap wakes only the workloads held for a change of that
// ConfigMap, never the holds of other objects or other namespaces.
func TestReleaseWakesOnlyItsHolds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := kubefake.NewClientset()
	for _, id := range []object.Ref{{Namespace: "shop", Name: "a"}, {Namespace: "shop", Name: "b"}, {Namespace: "other", Name: "a"}} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: id.Namespace, Name: id.Name}, Data: map[string]string{"k": "v"}}
		if _, err := cs.CoreV1().ConfigMaps(id.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	st := testStore(t, ctx, cs)
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	g := New(Config{Budget: 1, BudgetWindow: time.Hour, Now: func() time.Time { return now }}, st, events.NewFakeRecorder(100))
	// Each workload restarted once, then held by its budget for a change
	// of the ConfigMaps named.
	holds := map[string][]string{"shop/w-a": {"a"}, "shop/w-b": {"b"}, "shop/w-ab": {"a", "b"}, "other/w-a": {"a"}, "shop/w-none": nil}
	for id, names := range holds {
		ns, name, _ := strings.Cut(id, "/")
		key := object.Ref{Kind: "Deployment", Namespace: ns, Name: name}
		obj := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		p := plan.Plan{Action: plan.Restart}
		for _, n := range names {
			p.Changes = append(p.Changes, plan.Change{Ref: refs.Ref{Kind: refs.ConfigMap, Name: n}})
		}
		req, ok := admit(g, ctx, key, obj, p, func(error) {})
		if !ok {
			t.Fatal("first restart held")
		}
		g.Done(ctx, key, obj, req, nil)
		if _, ok := admit(g, ctx, key, obj, p, func(error) {}); ok {
			t.Fatal("second restart admitted")
		}
	}
	woken := func() []string {
		var out []string
		for {
			select {
			case e := <-g.Wakes():
				out = append(out, e.Object.Namespace+"/"+e.Object.Name)
			case <-time.After(100 * time.Millisecond):
				slices.Sort(out)
				return out
			}
		}
	}
	woken() // the holds' own wakes
	for i, tc := range []struct {
		release object.Ref
		want    []string
	}{
		{object.Ref{Kind: "ConfigMap", Namespace: "shop", Name: "a"}, []string{"shop/w-a", "shop/w-ab"}},
		{object.Ref{Kind: "ConfigMap", Namespace: "shop", Name: "b"}, []string{"shop/w-ab", "shop/w-b"}},
		{object.Ref{Kind: "ConfigMap", Namespace: "other", Name: "a"}, []string{"other/w-a"}},
		{object.Ref{Kind: "Secret", Namespace: "shop", Name: "a"}, nil},
		{object.Ref{Kind: "ConfigMap", Namespace: "tenant", Name: "anything"}, nil},
	} {
		old := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tc.release.Namespace, Name: tc.release.Name}}
		cur := old.DeepCopy()
		cur.Annotations = map[string]string{guard.ReleaseAnnotation: strconv.Itoa(i)}
		g.ConfigChanged(logr.Discard(), tc.release.Kind, old, cur, false)
		if got := woken(); !slices.Equal(got, tc.want) {
			t.Errorf("release on %s woke %v, want %v", tc.release, got, tc.want)
		}
	}
}
