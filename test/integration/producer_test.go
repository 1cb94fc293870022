package integration

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/producer"
	"github.com/watcher-dev/watcher/internal/served"
)

var (
	externalSecretGVK = schema.GroupVersionKind{Group: "external-secrets.io", Version: "v1", Kind: "ExternalSecret"}
	certificateGVK    = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}
	sealedSecretGVK   = schema.GroupVersionKind{Group: "bitnami.com", Version: "v1alpha1", Kind: "SealedSecret"}
	databaseGVK       = schema.GroupVersionKind{Group: "producer.watcher.test", Version: "v1", Kind: "Database"}
)

// installCRD installs crd, once a previous test's is gone, and waits until
// its API serves gvk in ns; the CRD goes when the test ends, and the test
// waits until it is gone.
func installCRD(t *testing.T, crd *unstructured.Unstructured, gvk schema.GroupVersionKind, ns string) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(crd), crd.DeepCopy()))
	}, wait, 100*time.Millisecond).Should(BeTrue(), "a previous test's CRD %s is still there", crd.GetName())
	create(t, crd)
	t.Cleanup(func() {
		// Gone before the next test, which may install it again or
		// require that it is absent (TestSealedSecrets).
		_ = k8s.Delete(ctx, crd)
		g.Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(crd), crd.DeepCopy()))
		}, wait, 100*time.Millisecond).Should(BeTrue(), "the CRD %s is not gone", crd.GetName())
	})
	g.Eventually(func() error {
		return k8s.List(ctx, &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind + "List"}}, client.InNamespace(ns))
	}, wait, 100*time.Millisecond).Should(Succeed())
}

// enqueued records the sources a Follower asks to look at again.
type enqueued struct {
	mu   sync.Mutex
	seen []object.Ref
}

func (e *enqueued) add(_ context.Context, src object.Ref) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seen = append(e.seen, src)
}

// since returns the sources enqueued since the n-th, and how many in all.
func (e *enqueued) since(n int) []object.Ref {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.seen[n:])
}

func (e *enqueued) len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.seen)
}

// startFollower runs a Follower of ns as app runs it (its APIs followed
// through served.Kinds while their CRDs are served), until the test ends.
func startFollower(t *testing.T, ns string, owners *producer.Owners) (*producer.Follower, *enqueued) {
	t.Helper()
	rec := &enqueued{}
	f := producer.New(producer.Options{Dynamic: dynamic.NewForConfigOrDie(restConfig), Namespaces: []string{ns}, Enqueue: rec.add, Owners: owners})
	w, err := served.New(restConfig, klogs.logger())
	if err != nil {
		t.Fatal(err)
	}
	kinds := served.NewKinds(f.APIs(), w, klogs.logger())
	runCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go func() { _ = w.Start(runCtx) }()
	go func() { _ = kinds.Start(runCtx) }()
	NewWithT(t).Eventually(func() error { return kinds.Checked(nil) }, wait, 50*time.Millisecond).Should(Succeed())
	return f, rec
}

// verdicts returns f's verdicts about sources, one line each.
func verdicts(f *producer.Follower, sources ...object.Ref) func() []string {
	return func() []string {
		var out []string
		for _, v := range f.Check(ctx, sources) {
			out = append(out, fmt.Sprintf("%s <- %s: %s %s", v.Source, v.Producer, v.State, v.Reason))
		}
		return out
	}
}

// setStatus writes the status of u through its status subresource, as its
// controller would.
func setStatus(t *testing.T, u *unstructured.Unstructured, status map[string]any) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			return err
		}
		u.Object["status"] = status
		return k8s.Status().Update(ctx, u)
	})
	if err != nil {
		t.Fatalf("write status of %s: %v", u.GetName(), err)
	}
}

func producerObject(gvk schema.GroupVersionKind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func conditions(conds ...map[string]any) []any {
	out := make([]any, len(conds))
	for i, c := range conds {
		c["lastTransitionTime"] = "2026-01-01T00:00:00Z"
		out[i] = c
	}
	return out
}

func condition(typ, status, reason string, gen ...int64) map[string]any {
	c := map[string]any{"type": typ, "status": status, "reason": reason, "message": reason + " said the producer"}
	if len(gen) > 0 {
		c["observedGeneration"] = gen[0]
	}
	return c
}

// esVersion returns the version External Secrets computes for the
// ExternalSecret u as the API server holds it now.
func esVersion(t *testing.T, u *unstructured.Unstructured) string {
	t.Helper()
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
		t.Fatal(err)
	}
	return producer.Version(u.GetGeneration(), u.GetLabels(), u.GetAnnotations())
}

func secretRef(ns, name string) object.Ref {
	return object.Ref{Kind: "Secret", Namespace: ns, Name: name}
}

// TestProducerFollower: with External Secrets' and Bitnami's own CRDs
// installed before the Follower starts and cert-manager's after, the test
// writes the status each producer would write and Check follows it:
// Progressing with no status, Current once synced at the current version
// or generation, Failed on the producer's error; a Secret no producer
// writes has no verdict. A status change enqueues the Secret produced.
// ForceSync makes the ExternalSecret Progressing at once, until the test
// writes the sync of the new version.
//
// Not parallel: the CRDs are cluster-wide.
func TestProducerFollower(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	installCRD(t, cachedCRD(t, "externalsecret-crd.yaml", "external-secrets"), externalSecretGVK, ns)
	installCRD(t, sealedSecretCRD(t), sealedSecretGVK, ns)
	f, rec := startFollower(t, ns, nil)

	es := producerObject(externalSecretGVK, ns, "db-creds", map[string]any{
		"secretStoreRef": map[string]any{"kind": "SecretStore", "name": "vault"},
		"target":         map[string]any{"name": "db"},
		"data":           []any{map[string]any{"secretKey": "password", "remoteRef": map[string]any{"key": "db/password"}}},
	})
	es.SetLabels(map[string]string{"app": "shop"})
	ss := producerObject(sealedSecretGVK, ns, "api", map[string]any{"encryptedData": map[string]any{"token": "AgBy3i4OJSWK+PiTySYZZA=="}})
	create(t, es, ss)
	db, api, plain := secretRef(ns, "db"), secretRef(ns, "api"), secretRef(ns, "plain")
	g.Eventually(verdicts(f, db, api, plain), wait, 50*time.Millisecond).Should(Equal([]string{
		fmt.Sprintf("Secret %s/api <- SealedSecret %s/api: Progressing NoStatus", ns, ns),
		fmt.Sprintf("Secret %s/db <- ExternalSecret %s/db-creds: Progressing NoStatus", ns, ns),
	}))

	// External Secrets syncs: Ready, at the version it computes.
	n := rec.len()
	setStatus(t, es, map[string]any{"conditions": conditions(condition("Ready", "True", "SecretSynced")), "syncedResourceVersion": esVersion(t, es)})
	g.Eventually(verdicts(f, db), wait, 50*time.Millisecond).Should(Equal([]string{
		fmt.Sprintf("Secret %s/db <- ExternalSecret %s/db-creds: Current Current", ns, ns)}))
	g.Eventually(func() []object.Ref { return rec.since(n) }, wait, 50*time.Millisecond).Should(ContainElement(db), "the status change enqueues the Secret")
	g.Expect(rec.since(n)).NotTo(ContainElement(api))

	// Its next sync fails.
	setStatus(t, es, map[string]any{"conditions": conditions(condition("Ready", "False", "SecretSyncedError")), "syncedResourceVersion": esVersion(t, es)})
	g.Eventually(verdicts(f, db), wait, 50*time.Millisecond).Should(Equal([]string{
		fmt.Sprintf("Secret %s/db <- ExternalSecret %s/db-creds: Failed ProducerFailed", ns, ns)}))
	setStatus(t, es, map[string]any{"conditions": conditions(condition("Ready", "True", "SecretSynced")), "syncedResourceVersion": esVersion(t, es)})
	g.Eventually(verdicts(f, db), wait, 50*time.Millisecond).Should(Equal([]string{
		fmt.Sprintf("Secret %s/db <- ExternalSecret %s/db-creds: Current Current", ns, ns)}))

	// Sibling refresh: not current from the moment ForceSync returns until
	// External Secrets reports the sync of the version the annotation made.
	g.Expect(f.ForceSync(ctx, object.Ref{Kind: "ExternalSecret", Namespace: ns, Name: "db-creds"})).To(Succeed())
	notCurrent := Or(ConsistOf(HaveSuffix(": Progressing ForceSyncSent")), ConsistOf(HaveSuffix(": Progressing NotSynced")))
	g.Expect(verdicts(f, db)()).To(notCurrent)
	g.Consistently(verdicts(f, db), time.Second, 50*time.Millisecond).Should(notCurrent)
	g.Expect(fetchU(t, es).GetAnnotations()).To(HaveKey(producer.ForceSyncAnnotation))
	setStatus(t, es, map[string]any{"conditions": conditions(condition("Ready", "True", "SecretSynced")), "syncedResourceVersion": esVersion(t, es)})
	g.Eventually(verdicts(f, db), wait, 50*time.Millisecond).Should(Equal([]string{
		fmt.Sprintf("Secret %s/db <- ExternalSecret %s/db-creds: Current Current", ns, ns)}))

	// The SealedSecret cannot be unsealed, then is.
	setStatus(t, ss, map[string]any{"observedGeneration": int64(1), "conditions": conditions(condition("Synced", "False", "ErrUnsealFailed"))})
	g.Eventually(verdicts(f, api), wait, 50*time.Millisecond).Should(Equal([]string{
		fmt.Sprintf("Secret %s/api <- SealedSecret %s/api: Failed ProducerFailed", ns, ns)}))
	setStatus(t, ss, map[string]any{"observedGeneration": int64(1), "conditions": conditions(condition("Synced", "True", ""))})
	g.Eventually(verdicts(f, api), wait, 50*time.Millisecond).Should(Equal([]string{
		fmt.Sprintf("Secret %s/api <- SealedSecret %s/api: Current Current", ns, ns)}))

	// cert-manager installed now: its CRD is followed without a restart.
	installCRD(t, cachedCRD(t, "certificate-crd.yaml", "cert-manager"), certificateGVK, ns)
	crt := producerObject(certificateGVK, ns, "web", map[string]any{
		"secretName": "web-tls", "dnsNames": []any{"web.example.com"},
		"issuerRef": map[string]any{"name": "ca", "kind": "Issuer"},
	})
	create(t, crt)
	tls := secretRef(ns, "web-tls")
	g.Eventually(verdicts(f, tls), wait, 50*time.Millisecond).Should(Equal([]string{
		fmt.Sprintf("Secret %s/web-tls <- Certificate %s/web: Progressing NoStatus", ns, ns)}))
	setStatus(t, crt, map[string]any{"conditions": conditions(condition("Ready", "False", "DoesNotExist", 1), condition("Issuing", "True", "DoesNotExist", 1))})
	g.Eventually(verdicts(f, tls), wait, 50*time.Millisecond).Should(Equal([]string{
		fmt.Sprintf("Secret %s/web-tls <- Certificate %s/web: Progressing Issuing", ns, ns)}))
	n = rec.len()
	setStatus(t, crt, map[string]any{"conditions": conditions(condition("Ready", "True", "Ready", 1))})
	g.Eventually(verdicts(f, tls), wait, 50*time.Millisecond).Should(Equal([]string{
		fmt.Sprintf("Secret %s/web-tls <- Certificate %s/web: Current Current", ns, ns)}))
	g.Eventually(func() []object.Ref { return rec.since(n) }, wait, 50*time.Millisecond).Should(ContainElement(tls))
	setStatus(t, crt, map[string]any{"conditions": conditions(condition("Ready", "True", "Ready", 1), condition("Issuing", "False", "Failed", 1))})
	g.Eventually(verdicts(f, tls), wait, 50*time.Millisecond).Should(Equal([]string{
		fmt.Sprintf("Secret %s/web-tls <- Certificate %s/web: Failed ProducerFailed", ns, ns)}))

	// A spec change: the status is for an older generation.
	edit(t, crt, func(u *unstructured.Unstructured) {
		g.Expect(unstructured.SetNestedStringSlice(u.Object, []string{"web.example.com", "www.example.com"}, "spec", "dnsNames")).To(Succeed())
	})
	g.Eventually(verdicts(f, tls), wait, 50*time.Millisecond).Should(Equal([]string{
		fmt.Sprintf("Secret %s/web-tls <- Certificate %s/web: Progressing OldGeneration", ns, ns)}))
}

// fetchU reads u again from the API server.
func fetchU(t *testing.T, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
		t.Fatal(err)
	}
	return u
}

// databaseCRD is a small CRD of a controller reporting kstatus-style
// status, for the generic owners.
func databaseCRD() *unstructured.Unstructured {
	schemaAny := map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "databases.producer.watcher.test"},
		"spec": map[string]any{
			"group": "producer.watcher.test", "scope": "Namespaced",
			"names": map[string]any{"kind": "Database", "listKind": "DatabaseList", "plural": "databases", "singular": "database"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema":       map[string]any{"openAPIV3Schema": schemaAny},
			}},
		},
	}}
	return u
}

// TestProducerOwner: a ConfigMap whose controller owner reports
// kstatus-style status (a Database here) is produced by it, read on
// demand: no verdict while the owner has no Ready condition, Failed on
// Ready=False at its generation, Current on Ready=True, Progressing once
// its generation moves past its status. A ConfigMap owned by a Deployment
// has no producer.
//
// Not parallel: the CRD is cluster-wide.
func TestProducerOwner(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	installCRD(t, databaseCRD(), databaseGVK, ns)
	hc, err := rest.HTTPClientFor(restConfig)
	g.Expect(err).NotTo(HaveOccurred())
	mapper, err := apiutil.NewDynamicRESTMapper(restConfig, hc)
	g.Expect(err).NotTo(HaveOccurred())
	owners := &producer.Owners{
		Dynamic: dynamic.NewForConfigOrDie(restConfig), Mapper: mapper,
		// What the controller's cache of sources would answer.
		Owner: func(src object.Ref) (metav1.OwnerReference, bool) {
			cm := configMap(src.Namespace, src.Name, nil)
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
				return metav1.OwnerReference{}, false
			}
			if ref := metav1.GetControllerOf(cm); ref != nil {
				return *ref, true
			}
			return metav1.OwnerReference{}, false
		},
	}
	f, _ := startFollower(t, ns, owners)

	pg := producerObject(databaseGVK, ns, "pg", map[string]any{"size": "small"})
	web := deployment(ns, "web", envFrom("web-cfg", ""))
	create(t, pg, web)
	conn := configMap(ns, "pg-conn", map[string]string{"host": "pg"})
	conn.OwnerReferences = []metav1.OwnerReference{{APIVersion: databaseGVK.GroupVersion().String(), Kind: "Database", Name: "pg", UID: pg.GetUID(), Controller: ptr.To(true)}}
	cfg := configMap(ns, "web-cfg", map[string]string{"a": "1"})
	cfg.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: web.UID, Controller: ptr.To(true)}}
	create(t, conn, cfg)
	sources := []object.Ref{{Kind: "ConfigMap", Namespace: ns, Name: "pg-conn"}, {Kind: "ConfigMap", Namespace: ns, Name: "web-cfg"}}

	g.Expect(verdicts(f, sources...)()).To(BeEmpty(), "an owner with no Ready condition is not a producer")
	setStatus(t, pg, map[string]any{"observedGeneration": int64(1), "conditions": conditions(condition("Ready", "False", "AuthFailed"))})
	g.Expect(verdicts(f, sources...)()).To(Equal([]string{fmt.Sprintf("ConfigMap %s/pg-conn <- Database %s/pg: Failed ProducerFailed", ns, ns)}))
	setStatus(t, pg, map[string]any{"observedGeneration": int64(1), "conditions": conditions(condition("Ready", "True", "Succeeded"))})
	g.Expect(verdicts(f, sources...)()).To(Equal([]string{fmt.Sprintf("ConfigMap %s/pg-conn <- Database %s/pg: Current Current", ns, ns)}))
	edit(t, pg, func(u *unstructured.Unstructured) {
		g.Expect(unstructured.SetNestedField(u.Object, "large", "spec", "size")).To(Succeed())
	})
	g.Expect(verdicts(f, sources...)()).To(Equal([]string{fmt.Sprintf("ConfigMap %s/pg-conn <- Database %s/pg: Progressing OldGeneration", ns, ns)}))
}
