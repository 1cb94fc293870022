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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"

	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/producer"
	"github.com/watcher-dev/watcher/internal/refs"
)

// changeOf is the plan of a restart of a workload reading the ConfigMaps
// read, for a change of those in changed.
func changeOf(read []string, changed ...string) plan.Plan {
	p := plan.Plan{Action: plan.Restart, Record: plan.Record{}}
	for _, n := range read {
		p.Record["ConfigMap/"+n] = &plan.Entry{All: true}
	}
	for _, n := range changed {
		p.Changes = append(p.Changes, plan.Change{Ref: refs.Ref{Kind: refs.ConfigMap, Name: n}})
	}
	return p
}

// touch tells g that the ConfigMap shop/name was written.
func touch(g *Guards, name string) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}}
	g.ConfigChanged(logr.Discard(), "ConfigMap", cm, cm, true)
}

// TestWaveInPriorityAfterSettle: three workloads of one namespace
// (priorities 0, 1, 2) restarted for one change, held together for its
// settle and decided again at the same moment with one wave slot, in the
// order 2, 1, 0, start 0, 1, 2: the change reaches first the workload
// meant to go first.
func TestWaveInPriorityAfterSettle(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := kubefake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cfg"}, Data: map[string]string{"k": "v2"}})
	st := testStore(t, ctx, cs)
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	g := New(Config{MaxConcurrent: 1, RolloutTimeout: 10 * time.Minute, Settle: time.Minute, SettleMax: 2 * time.Minute,
		Now: func() time.Time { return now }}, st, events.NewFakeRecorder(100))
	p := changeOf([]string{"cfg"}, "cfg")
	key := func(prio int) object.Ref {
		return object.Ref{Kind: "Deployment", Namespace: "shop", Name: "p" + strconv.Itoa(prio)}
	}
	objOf := func(prio int) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p" + strconv.Itoa(prio),
			Annotations: map[string]string{guard.PriorityAnnotation: strconv.Itoa(prio)}}}
	}
	touch(g, "cfg")
	for prio := range 3 {
		if _, ok := admit(g, ctx, key(prio), objOf(prio), p, func(error) {}); ok {
			t.Fatalf("p%d admitted before its settle", prio)
		}
	}
	now = now.Add(time.Minute + time.Second) // all woken at once
	var started []string
	pending := []int{2, 1, 0}
	for round := 0; len(pending) > 0; round++ {
		if round > 3 {
			t.Fatalf("started %v, then nothing of %v", started, pending)
		}
		for _, prio := range pending {
			req, ok := admit(g, ctx, key(prio), objOf(prio), p, func(error) {})
			if !ok {
				continue
			}
			started = append(started, key(prio).Name)
			pending = slices.DeleteFunc(pending, func(x int) bool { return x == prio })
			g.Done(ctx, key(prio), objOf(prio), req, nil)
			now = now.Add(10 * time.Second)
			// Its rollout is done.
			g.Observe(ctx, key(prio), &metav1.PartialObjectMetadata{ObjectMeta: objOf(prio).ObjectMeta}, false)
			break
		}
	}
	if want := []string{"p0", "p1", "p2"}; !slices.Equal(started, want) {
		t.Errorf("started %v, want %v", started, want)
	}
}

// TestNewProcessWaitsWholeSettle: a new process (its flap detector has
// seen no change) deciding a restart whose change set was not kept on
// the workload yet waits a whole settle, so that the rest of a change
// written in parts joins it: the workload rolls out once. Nothing kept
// (no signing key) still ends the wait.
func TestNewProcessWaitsWholeSettle(t *testing.T) {
	for _, keep := range []bool{true, false} {
		t.Run("kept "+strconv.FormatBool(keep), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cs := kubefake.NewClientset(
				&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "user"}, Data: map[string]string{"k": "v2"}},
				&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "pass"}, Data: map[string]string{"k": "v1"}})
			st := testStore(t, ctx, cs)
			now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
			cfg := Config{Settle: time.Minute, SettleMax: 5 * time.Minute, Now: func() time.Time { return now }}
			if keep {
				cfg.Sign = hash.NewHasher([]byte("0123456789abcdef0123")).MAC
			}
			g := New(cfg, st, events.NewFakeRecorder(100)) // started after user changed
			key := object.Ref{Kind: "Deployment", Namespace: "shop", Name: "web"}
			obj := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "u1"}}
			read := []string{"user", "pass"}
			admits := 0
			admit := func(p plan.Plan) bool {
				req, ok := admit(g, ctx, key, obj, p, func(error) {})
				if ok {
					admits++
					return true
				}
				if v := g.Pending(key, obj, req); v != "" {
					obj.Annotations = map[string]string{guard.PendingAnnotation: v}
				}
				return false
			}
			if admit(changeOf(read, "user")) {
				t.Fatal("the first part of the change rolled out at once in a new process")
			}
			now = now.Add(20 * time.Second)
			touch(g, "pass") // the second part lands
			now = now.Add(45 * time.Second)
			if admit(changeOf(read, "user", "pass")) {
				t.Fatal("rolled out 45s after the second part, settle 1m")
			}
			now = now.Add(20 * time.Second)
			if !admit(changeOf(read, "user", "pass")) {
				t.Fatal("the whole change set still held after its settle")
			}
			if admits != 1 {
				t.Errorf("%d rollouts for one change", admits)
			}
			g.Settled(ctx, key) // the gauges are shared by the tests
		})
	}
}

// TestFailedProducerOfUnchangedSource: a workload reads ConfigMap cfg and
// Secret creds, written by an ExternalSecret that reports an error; creds
// did not change. A change of cfg rolls out at once (nothing of creds
// would change with it), with one Warning ProducerFailed naming the
// ExternalSecret and the Secret, however often it is decided.
func TestFailedProducerOfUnchangedSource(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := failedExternalSecret(t, ctx, "creds")
	cs := kubefake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cfg"}, Data: map[string]string{"k": "v2"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "creds"}, Data: map[string][]byte{"p": []byte("last-good")}})
	st := testStore(t, ctx, cs)
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	rec := events.NewFakeRecorder(100)
	g := New(Config{Producers: f, ProducerTimeout: 10 * time.Minute, ProducerTimeoutHold: true, SettleMax: 2 * time.Minute,
		Budget: 1, BudgetWindow: time.Hour, Now: func() time.Time { return now }}, st, rec)
	key := object.Ref{Kind: "Deployment", Namespace: "shop", Name: "web"}
	obj := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	p := plan.Plan{Action: plan.Restart,
		Record:  plan.Record{"ConfigMap/cfg": &plan.Entry{All: true}, "Secret/creds": &plan.Entry{All: true}},
		Changes: []plan.Change{{Ref: refs.Ref{Kind: refs.ConfigMap, Name: "cfg"}}}}
	req, ok := admit(g, ctx, key, obj, p, func(error) {})
	if !ok {
		t.Fatalf("held by the failed producer of an unchanged Secret: %+v", req.Producers)
	}
	g.Done(ctx, key, obj, req, nil)
	// Changed again: held by the budget, decided again and again.
	for range 3 {
		now = now.Add(time.Minute)
		if _, ok := admit(g, ctx, key, obj, p, func(error) {}); ok {
			t.Fatal("budget ignored")
		}
	}
	var warned []string
	for len(rec.Events) > 0 {
		if e := <-rec.Events; strings.Contains(e, ReasonProducerFailed) {
			warned = append(warned, e)
		}
	}
	if len(warned) != 2 {
		t.Fatalf("Warnings %q, want one per restart", warned)
	}
	if e := warned[0]; !strings.HasPrefix(e, "Warning ProducerFailed ExternalSecret creds, which writes Secret creds, reports an error") ||
		!strings.Contains(e, "not waited for") || strings.Contains(e, "last-good") {
		t.Errorf("Event %q", e)
	}
	// The producer of a changed source is waited for, with its bound.
	p.Changes = append(p.Changes, plan.Change{Ref: refs.Ref{Kind: refs.Secret, Name: "creds"}})
	other := New(Config{Producers: f, ProducerTimeout: 10 * time.Minute, Now: func() time.Time { return now }}, st, events.NewFakeRecorder(100))
	if _, ok := admit(other, ctx, key, obj, p, func(error) {}); ok {
		t.Error("the failed producer of a changed Secret not waited for")
	}
	g.Settled(ctx, key) // the gauges are shared by the tests
	other.Settled(ctx, key)
}

// failedExternalSecret returns a follower of producers that knows one
// ExternalSecret shop/name, writing the Secret name, that reports an
// error.
func failedExternalSecret(t *testing.T, ctx context.Context, name string) *producer.Follower {
	t.Helper()
	es := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"target": map[string]any{"name": name}},
		"status": map[string]any{"conditions": []any{map[string]any{
			"type": "Ready", "status": "False", "reason": "SecretSyncedError", "message": "could not get secret data from provider"}}},
	}}
	es.SetGroupVersionKind(schema.GroupVersionKind{Group: "external-secrets.io", Version: "v1", Kind: "ExternalSecret"})
	es.SetNamespace("shop")
	es.SetName(name)
	es.SetGeneration(1)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		{Group: "external-secrets.io", Version: "v1", Resource: "externalsecrets"}: "ExternalSecretList",
		{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}:        "CertificateList",
		{Group: "bitnami.com", Version: "v1alpha1", Resource: "sealedsecrets"}:     "SealedSecretList",
	}, es)
	f := producer.New(producer.Options{Dynamic: dyn})
	a := f.APIs()[0]
	if err := a.Enable(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Disable)
	for range 200 {
		if len(f.Check(ctx, []object.Ref{{Kind: "Secret", Namespace: "shop", Name: name}})) > 0 {
			return f
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the ExternalSecret never seen")
	return nil
}
