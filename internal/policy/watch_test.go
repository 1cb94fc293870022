package policy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"

	"github.com/watcher-dev/watcher/api/v1alpha1"
	"github.com/watcher-dev/watcher/internal/packed"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/served"
	"github.com/watcher-dev/watcher/internal/workload"
)

// stubStore holds one Deployment, shop/web, and counts re-indexes.
type stubStore struct {
	mu        sync.Mutex
	reindexed []string
}

func (s *stubStore) Get(kind, _, name string) (*metav1.PartialObjectMetadata, error) {
	if kind == "Deployment" && name == "web" {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}, nil
	}
	return nil, nil
}
func (s *stubStore) Workloads(string, string) ([]*packed.Object, error) {
	return nil, nil
}
func (s *stubStore) List(refs.Kind, string) ([]*packed.Object, error) {
	return nil, nil
}
func (s *stubStore) UsersOf(refs.Kind, string, string) ([]workload.Key, error) { return nil, nil }
func (s *stubStore) Reindex(kind, ns, name string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reindexed = append(s.reindexed, kind+" "+ns+"/"+name)
	return true, nil
}

// TestWatcherFollowsTheCRD: without the CRD the watcher says once that
// policies are off and is synced (the controller may start); when the CRD
// appears it starts its informers; one discovery answer without it (a
// blip) changes nothing: the policy still holds its window and dry run;
// when it stays gone for Confirm, the watcher forgets every policy and
// releases (re-indexes, hands on) the workloads they selected.
func TestWatcherFollowsTheCRD(t *testing.T) {
	var mu sync.Mutex
	var logged []string
	log := funcr.New(func(_, args string) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, args)
	}, funcr.Options{})
	ans := served.Answer{Known: true} // the CRD not served
	rc, err := rest.RESTClientFor(&rest.Config{Host: "http://127.0.0.1:1", APIPath: "/apis",
		ContentConfig: rest.ContentConfig{GroupVersion: &v1alpha1.GroupVersion, NegotiatedSerializer: noSerializer()}})
	if err != nil {
		t.Fatal(err)
	}
	st := &stubStore{}
	clock := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	w := &Watcher{Index: NewIndex(), Store: st, Log: log, rest: rc, now: func() time.Time { return clock }}
	var changed []string
	w.OnChange(func(p string, keys []workload.Key) {
		for _, k := range keys {
			changed = append(changed, p+": "+k.String())
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	off := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, l := range logged {
			if strings.Contains(l, "policies are off") {
				n++
			}
		}
		return n
	}

	if w.Synced() {
		t.Fatal("synced before discovery answered")
	}
	w.answer(ctx, ans)
	w.answer(ctx, ans)
	if n := off(); n != 1 || w.On() || !w.Synced() {
		t.Fatalf("without the CRD: said %d times, on %v, synced %v", n, w.On(), w.Synced())
	}

	ans = served.Answer{Served: true, Known: true}
	w.answer(ctx, ans)
	if !w.On() {
		t.Fatal("the CRD is served: informers not started")
	}
	w.set(&v1alpha1.ReloadPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p", Generation: 1}, Spec: v1alpha1.ReloadPolicySpec{
		Sources: []v1alpha1.Source{{Kind: "ConfigMap", Name: "cm"}}, Targets: []v1alpha1.Target{{Kind: "Deployment", Name: "web"}},
		MaintenanceWindows: []v1alpha1.MaintenanceWindow{{Schedule: "0 2 * * *", Duration: metav1.Duration{Duration: time.Hour}}},
		DryRun:             true,
	}})
	if len(w.Index.In("shop")) != 1 || len(changed) != 1 {
		t.Fatalf("policy added: index %v, changed %v", w.Index.In("shop"), changed)
	}
	holds := func() (hold, dry bool) {
		web := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
		a, err := w.Index.For(web, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		hold, _, _ = a.Hold(clock)
		return hold, a.DryRun
	}
	if hold, dry := holds(); !hold || !dry {
		t.Fatalf("at noon, outside the 02:00 window: hold %v, dry run %v", hold, dry)
	}

	// A blip: one answer without the CRD, then served again.
	ans = served.Answer{Known: true}
	w.answer(ctx, ans)
	if hold, dry := holds(); !w.On() || !hold || !dry || len(changed) != 1 {
		t.Fatalf("after one answer without the CRD: on %v, hold %v, dry run %v, changed %v; want all kept", w.On(), hold, dry, changed)
	}
	ans = served.Answer{Served: true, Known: true}
	clock = clock.Add(DefaultConfirm)
	w.answer(ctx, ans)

	// Gone for good: kept until the absence has lasted DefaultConfirm.
	ans = served.Answer{Known: true}
	w.answer(ctx, ans)
	clock = clock.Add(DefaultConfirm - time.Second)
	w.answer(ctx, ans)
	if hold, dry := holds(); !w.On() || !hold || !dry {
		t.Fatalf("absent for %s: on %v, hold %v, dry run %v; want all kept", DefaultConfirm-time.Second, w.On(), hold, dry)
	}
	clock = clock.Add(time.Second)
	w.answer(ctx, ans)
	if w.On() || len(w.Index.In("shop")) != 0 {
		t.Fatalf("the CRD is gone: on %v, policies %v", w.On(), w.Index.In("shop"))
	}
	if want := "shop/p: Deployment shop/web"; len(changed) != 2 || changed[1] != want {
		t.Errorf("released: %v, want a second %q", changed, want)
	}
	if len(st.reindexed) != 2 {
		t.Errorf("re-indexed %v, want web twice (added, released)", st.reindexed)
	}
	if n := off(); n != 1 {
		t.Errorf("said %d times that policies are off, want once", n)
	}
}

func noSerializer() runtime.NegotiatedSerializer {
	s, _ := Scheme()
	return serializer.NewCodecFactory(s).WithoutConversion()
}

// TestInitialListAppliedAtOnce: the policies of an informer's initial
// list are only indexed as they come; once the list is in, they are
// applied together: each workload they select re-indexed and handed on
// once (not once per policy), every policy handed on for its status, and
// only then is the watcher synced (the controller starts no worker
// before).
func TestInitialListAppliedAtOnce(t *testing.T) {
	st := &stubStore{}
	w := &Watcher{Index: NewIndex(), Store: st, Log: logr.Discard(), checked: true, initial: 1}
	var workloads, statuses []string
	w.OnChange(func(p string, keys []workload.Key) {
		for _, k := range keys {
			workloads = append(workloads, k.String())
		}
		if p != "" && len(keys) == 0 {
			statuses = append(statuses, p)
		}
	})
	for i := range 3 {
		w.setInitial(&v1alpha1.ReloadPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprintf("p%d", i), Generation: 1},
			Spec: v1alpha1.ReloadPolicySpec{Sources: []v1alpha1.Source{{Kind: "ConfigMap", Name: "cm"}}, Targets: []v1alpha1.Target{{Kind: "Deployment", Name: "web"}}}})
	}
	if len(w.Index.In("shop")) != 3 || len(st.reindexed) != 0 || len(workloads)+len(statuses) != 0 || w.Synced() {
		t.Fatalf("during the initial list: %d policies, re-indexed %v, handed on %v %v, synced %v; want 3 and nothing else",
			len(w.Index.In("shop")), st.reindexed, workloads, statuses, w.Synced())
	}
	if keys := slices.Sorted(slices.Values(w.Index.Keys())); !slices.Equal(keys, []string{"shop/p0", "shop/p1", "shop/p2"}) {
		t.Errorf("Keys = %v", keys)
	}
	w.applyInitial()
	slices.Sort(statuses)
	if !slices.Equal(st.reindexed, []string{"Deployment shop/web"}) || !slices.Equal(workloads, []string{"Deployment shop/web"}) ||
		!slices.Equal(statuses, []string{"shop/p0", "shop/p1", "shop/p2"}) || !w.Synced() {
		t.Errorf("applied: re-indexed %v, handed on %v and %v, synced %v; want web once, the 3 policies, synced",
			st.reindexed, workloads, statuses, w.Synced())
	}
}

// TestSlim: the policy informers keep no managed fields, and equal
// selectors of targets, of one policy or several, are one value.
func TestSlim(t *testing.T) {
	w := &Watcher{}
	policy := func() *v1alpha1.ReloadPolicy {
		return &v1alpha1.ReloadPolicy{
			ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
			Spec: v1alpha1.ReloadPolicySpec{Targets: []v1alpha1.Target{
				{Kind: "Deployment", Selector: sel("tier", "a")}, {Kind: "Deployment", Selector: sel("tier", "a")},
				{Kind: "Deployment", Selector: sel("tier", "b")}, {Kind: "Deployment", Name: "web"},
			}},
		}
	}
	var out []*v1alpha1.ReloadPolicy
	for range 2 {
		o, err := w.slim(policy())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o.(*v1alpha1.ReloadPolicy))
	}
	same := func(a, b *metav1.LabelSelector) bool { return a == b }
	a, b := out[0].Spec.Targets, out[1].Spec.Targets
	if out[0].ManagedFields != nil || !same(a[0].Selector, a[1].Selector) || !same(a[0].Selector, b[0].Selector) ||
		same(a[0].Selector, a[2].Selector) || a[2].Selector.MatchLabels["tier"] != "b" {
		t.Errorf("slim: managed fields %v; tier=a maps shared within and across policies, tier=b apart: %v", out[0].ManagedFields, a)
	}
}

// TestAnswerAsksAgainToConfirm: followed through served.Watcher, the CRD's
// absence is confirmed by a second answer that the watcher asks for:
// after the first answer without the CRD it keeps the policies and asks
// again once Confirm has passed; that answer switches them off. A CRD back
// in between asks nothing more.
func TestAnswerAsksAgainToConfirm(t *testing.T) {
	rc, err := rest.RESTClientFor(&rest.Config{Host: "http://127.0.0.1:1", APIPath: "/apis",
		ContentConfig: rest.ContentConfig{GroupVersion: &v1alpha1.GroupVersion, NegotiatedSerializer: noSerializer()}})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	w := &Watcher{Index: NewIndex(), Store: &stubStore{}, Log: logr.Discard(), rest: rc, Confirm: 10 * time.Second,
		now: func() time.Time { return clock }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	servedNow, absent := served.Answer{Served: true, Known: true}, served.Answer{Known: true}

	if again := w.answer(ctx, absent); again != 0 || w.On() || !w.Synced() {
		t.Fatalf("without the CRD at start: again %s, on %v, synced %v; want 0, off, synced", again, w.On(), w.Synced())
	}
	if again := w.answer(ctx, servedNow); again != 0 || !w.On() {
		t.Fatalf("CRD served: again %s, on %v", again, w.On())
	}
	// A blip: kept, asked again; the CRD is back before that.
	if again := w.answer(ctx, absent); again != 10*time.Second+confirmSlack || !w.On() {
		t.Fatalf("first answer without the CRD: again %s, on %v; want %s, on", again, w.On(), 10*time.Second+confirmSlack)
	}
	clock = clock.Add(3 * time.Second)
	if again := w.answer(ctx, servedNow); again != 0 || !w.On() {
		t.Fatalf("CRD back: again %s, on %v", again, w.On())
	}
	// Gone for good: the answer asked for switches the policies off.
	again := w.answer(ctx, absent)
	clock = clock.Add(4 * time.Second)
	if again2 := w.answer(ctx, absent); again2 != again-4*time.Second || !w.On() {
		t.Fatalf("second answer before Confirm: again %s (first %s), on %v; want the rest of Confirm, on", again2, again, w.On())
	}
	clock = clock.Add(again - 4*time.Second)
	if again := w.answer(ctx, absent); again != 0 || w.On() {
		t.Fatalf("answer at the time asked: again %s, on %v; want 0, off", again, w.On())
	}
}
