package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/watcher-dev/watcher/internal/object"
)

func TestNilFollower(t *testing.T) {
	var f *Follower
	if got := f.Check(context.Background(), []object.Ref{{Kind: "Secret", Namespace: "a", Name: "b"}}); got != nil {
		t.Errorf("Check = %v, want nil", got)
	}
	if got := f.APIs(); got != nil {
		t.Errorf("APIs = %v, want none", got)
	}
	if err := f.ForceSync(context.Background(), object.Ref{Kind: "ExternalSecret", Namespace: "a", Name: "b"}); !errors.Is(err, ErrNotFollowed) {
		t.Errorf("ForceSync = %v, want ErrNotFollowed", err)
	}
}

// recorder records what a Follower enqueues.
type recorder struct {
	mu   sync.Mutex
	seen []object.Ref
}

func (r *recorder) add(_ context.Context, src object.Ref) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, src)
}

func (r *recorder) take() []object.Ref {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.seen
	r.seen = nil
	return out
}

// TestHandlers: the handlers enqueue the Secret produced when what the
// rules read changes, not when only the resource version does; both
// Secrets when the target moves.
func TestHandlers(t *testing.T) {
	rec := &recorder{}
	f := New(Options{Enqueue: rec.add})
	h := f.apis[1].handlers(context.Background()) // Certificate
	crt := func(rv, secretName, ready string) *unstructured.Unstructured {
		u := obj(certificateV1, 1, map[string]any{"spec": map[string]any{"secretName": secretName}, "status": status(cond("Ready", ready, "", "", 1))})
		u.SetResourceVersion(rv)
		return Trim(certificateV1, u)
	}
	secret := func(name string) object.Ref { return object.Ref{Kind: "Secret", Namespace: "shop", Name: name} }
	h.OnUpdate(crt("1", "tls", "False"), crt("2", "tls", "False"))
	if got := rec.take(); len(got) != 0 {
		t.Errorf("a resync enqueued %v", got)
	}
	h.OnUpdate(crt("2", "tls", "False"), crt("3", "tls", "True"))
	if got := rec.take(); len(got) != 1 || got[0] != secret("tls") {
		t.Errorf("a status change enqueued %v, want the Secret tls", got)
	}
	h.OnUpdate(crt("3", "tls", "True"), crt("4", "tls2", "True"))
	if got := rec.take(); len(got) != 2 || got[0] != secret("tls") || got[1] != secret("tls2") {
		t.Errorf("a moved target enqueued %v, want tls then tls2", got)
	}
	h.OnAdd(crt("5", "tls", "True"), true)
	if got := rec.take(); len(got) != 0 {
		t.Errorf("the initial list enqueued %v", got)
	}
	h.OnDelete(crt("5", "tls", "True"))
	if got := rec.take(); len(got) != 1 || got[0] != secret("tls") {
		t.Errorf("a deletion enqueued %v, want tls", got)
	}
}

// TestCheckFromCache: with the informers running on a fake API, Check
// judges at most MaxPerSource producers of one Secret, sorted, from
// objects trimmed of their spec; a ConfigMap or a Secret no producer
// writes has no verdict; ForceSync patches the annotation only.
func TestCheckFromCache(t *testing.T) {
	var objs []runtime.Object
	for i := range 6 {
		u := obj(certificateV1, 1, map[string]any{"spec": map[string]any{"secretName": "tls", "privateKey": map[string]any{"algorithm": "RSA"}},
			"status": status(cond("Ready", "True", "Ready", "", 1))})
		u.SetName(fmt.Sprintf("crt-%d", i))
		objs = append(objs, u)
	}
	es := obj(externalSecretV1, 2, map[string]any{"spec": map[string]any{"target": map[string]any{"name": "creds"}}})
	es.SetAnnotations(map[string]string{"team": "a"})
	es.Object["status"] = map[string]any{"conditions": []any{cond("Ready", "True", "SecretSynced", "")}, "syncedResourceVersion": Version(2, nil, map[string]string{"team": "a"})}
	once := obj(externalSecretV1, 1, map[string]any{"spec": map[string]any{"refreshPolicy": "CreatedOnce"}})
	once.SetName("once")
	objs = append(objs, es, once)
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		certificateV1.gvk.GroupVersion().WithResource("certificates"):         "CertificateList",
		externalSecretV1.gvk.GroupVersion().WithResource("externalsecrets"):   "ExternalSecretList",
		sealedSecretV1alpha1.gvk.GroupVersion().WithResource("sealedsecrets"): "SealedSecretList",
	}, objs...)
	f := New(Options{Dynamic: client, Now: func() time.Time { return time.Unix(1700000000, 0) }})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, a := range f.apis {
		if err := a.Enable(ctx); err != nil {
			t.Fatal(err)
		}
		defer a.Disable()
	}
	for _, a := range f.apis {
		for _, inf := range a.informers() {
			for !inf.HasSynced() {
				time.Sleep(10 * time.Millisecond)
			}
			for _, o := range inf.GetStore().List() {
				if _, ok := o.(*unstructured.Unstructured).Object["spec"]; ok {
					t.Errorf("the cache holds a spec: %v", o)
				}
			}
		}
	}
	tls := object.Ref{Kind: "Secret", Namespace: "shop", Name: "tls"}
	creds := object.Ref{Kind: "Secret", Namespace: "shop", Name: "creds"}
	got := f.Check(ctx, []object.Ref{tls, creds, {Kind: "ConfigMap", Namespace: "shop", Name: "tls"}, {Kind: "Secret", Namespace: "shop", Name: "plain"}})
	var lines []string
	for _, v := range got {
		lines = append(lines, fmt.Sprintf("%s <- %s: %s", v.Source, v.Producer, v.State))
	}
	want := []string{
		"Secret shop/creds <- ExternalSecret shop/db: Current",
		"Secret shop/tls <- Certificate shop/crt-0: Current",
		"Secret shop/tls <- Certificate shop/crt-1: Current",
		"Secret shop/tls <- Certificate shop/crt-2: Current",
		"Secret shop/tls <- Certificate shop/crt-3: Current",
	}
	if fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Errorf("Check =\n%q\nwant\n%q", lines, want)
	}

	if err := f.ForceSync(ctx, object.Ref{Kind: "ExternalSecret", Namespace: "shop", Name: "db"}); err != nil {
		t.Fatal(err)
	}
	var patch string
	for _, a := range client.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			patch = string(p.GetPatch())
		}
	}
	if want := `{"metadata":{"annotations":{"force-sync":"1700000000"}}}`; patch != want {
		t.Errorf("ForceSync patched %s, want %s", patch, want)
	}
	if err := f.ForceSync(ctx, object.Ref{Kind: "ExternalSecret", Namespace: "shop", Name: "once"}); !errors.Is(err, ErrSyncsOnce) {
		t.Errorf("ForceSync of an ExternalSecret synced once = %v, want ErrSyncsOnce", err)
	}
	if err := f.ForceSync(ctx, object.Ref{Kind: "Certificate", Namespace: "shop", Name: "crt-0"}); err == nil {
		t.Error("ForceSync of a Certificate succeeded")
	}
}

// TestOwnersBounded: one Check reads at most maxOwnerReads owners; an
// owner found not to be a producer (a Deployment, reporting its
// generation without a Ready condition) is not read again for a while,
// one with no status yet is.
func TestOwnersBounded(t *testing.T) {
	dbGVK := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Database"}
	deployGVK := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(dbGVK, meta.RESTScopeNamespace)
	mapper.Add(deployGVK, meta.RESTScopeNamespace)
	var objs []runtime.Object
	owner := map[object.Ref]metav1.OwnerReference{}
	for i := range 20 {
		u := &unstructured.Unstructured{Object: map[string]any{"status": with(status(cond("Ready", "True", "", "")), "observedGeneration", int64(1))}}
		u.SetGroupVersionKind(dbGVK)
		u.SetNamespace("shop")
		u.SetName(fmt.Sprintf("db-%d", i))
		u.SetUID(types.UID(u.GetName()))
		u.SetGeneration(1)
		objs = append(objs, u)
		owner[object.Ref{Kind: "ConfigMap", Namespace: "shop", Name: u.GetName()}] = metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Database", Name: u.GetName(), UID: u.GetUID()}
	}
	for _, name := range []string{"web", "new"} {
		d := &unstructured.Unstructured{Object: map[string]any{}}
		d.SetGroupVersionKind(deployGVK)
		d.SetNamespace("shop")
		d.SetName(name)
		d.SetUID(types.UID(name))
		d.SetGeneration(3)
		if name == "web" {
			d.Object["status"] = map[string]any{"observedGeneration": int64(3), "conditions": []any{cond("Available", "True", "", "")}}
		}
		objs = append(objs, d)
		owner[object.Ref{Kind: "ConfigMap", Namespace: "shop", Name: name}] = metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name, UID: d.GetUID()}
	}
	owner[object.Ref{Kind: "Secret", Namespace: "shop", Name: "sealed"}] = metav1.OwnerReference{APIVersion: "bitnami.com/v1alpha1", Kind: "SealedSecret", Name: "sealed", UID: "s"}
	owner[object.Ref{Kind: "ConfigMap", Namespace: "shop", Name: "gone"}] = metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Database", Name: "db-0", UID: "an-older-db-0"}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		dbGVK.GroupVersion().WithResource("databases"):       "DatabaseList",
		deployGVK.GroupVersion().WithResource("deployments"): "DeploymentList",
	}, objs...)
	gets := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "get" {
				n++
			}
		}
		client.ClearActions()
		return n
	}
	f := New(Options{Owners: &Owners{Dynamic: client, Mapper: mapper, Owner: func(src object.Ref) (metav1.OwnerReference, bool) {
		ref, ok := owner[src]
		return ref, ok
	}}})
	ctx := context.Background()
	var sources []object.Ref
	for src := range owner {
		if src.Name != "web" && src.Name != "new" && src.Name != "sealed" && src.Name != "gone" {
			sources = append(sources, src)
		}
	}
	if got := f.Check(ctx, sources); len(got) != maxOwnerReads || gets() != maxOwnerReads {
		t.Errorf("Check of %d sources: %d verdicts, want %d, and as many reads", len(sources), len(got), maxOwnerReads)
	}

	others := []object.Ref{{Kind: "ConfigMap", Namespace: "shop", Name: "web"}, {Kind: "ConfigMap", Namespace: "shop", Name: "new"},
		{Kind: "Secret", Namespace: "shop", Name: "sealed"}, {Kind: "ConfigMap", Namespace: "shop", Name: "gone"}}
	if got := f.Check(ctx, others); len(got) != 0 {
		t.Errorf("Check = %v, want no producer", got)
	}
	if n := gets(); n != 3 {
		t.Errorf("%d reads, want 3 (web, new, gone; never the SealedSecret)", n)
	}
	f.Check(ctx, others)
	if n := gets(); n != 1 {
		t.Errorf("%d reads again, want 1 (new, which has no status yet)", n)
	}
}
