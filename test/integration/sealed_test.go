package integration

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/sealed"
	"github.com/watcher-dev/watcher/test/fixture"
)

// sealedSecretCRD reads Bitnami's own SealedSecret CRD, which hack/crds.sh
// copies out of the sealed-secrets Go module.
func sealedSecretCRD(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	return cachedCRD(t, "sealedsecret-crd.yaml", "sealed-secrets")
}

// sealedSecret returns a SealedSecret with the given ciphertexts (any
// string will do for the API server: no sealed-secrets controller runs).
func sealedSecret(ns, name string, enc map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"encryptedData": enc,
		"template":      map[string]any{"metadata": map[string]any{"name": name}},
	}}}
	u.SetGroupVersionKind(sealed.GVK)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func sealedChanges(event string) float64 {
	return testutil.ToFloat64(metrics.SealedSecretChanges.WithLabelValues(event))
}

// TestSealedSecrets: watcher starts without the SealedSecret CRD; the CRD
// (Bitnami's own, from its Go module) is installed and within seconds
// watcher reports the creation of a SealedSecret, the update of the keys
// sealed again (not a change of its status or labels), and its deletion:
// a log line, an Event on the SealedSecret and watcher_sealedsecret_changes_total.
// The Secret made from it (owned by it, as the sealed-secrets controller
// makes it) changes: the restart of its user names the SealedSecret. The
// CRD goes: watcher stops watching it, and stays ready.
//
// Not parallel: the CRD is cluster-wide, and the counters global.
func TestSealedSecrets(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	crd := sealedSecretCRD(t)
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(crd), crd.DeepCopy()); !apierrors.IsNotFound(err) {
		t.Fatalf("the SealedSecret CRD is already there (%v)", err)
	}
	sec := secret(ns, "db", map[string]string{"password": "s3cr3t-one"})
	create(t, sec)
	web := track(t, deployment(ns, "web", envFrom("", "db")))
	addr := fixture.FreeAddr(t)
	w := startWatcher(t, ns, func(o *options.Options) { o.HealthAddr = addr })
	waitAdopted(t, deployment(ns, "web", envFrom("", "db")))
	created, updated, deleted := sealedChanges(sealed.Created), sealedChanges(sealed.Updated), sealedChanges(sealed.Deleted)

	create(t, crd)
	t.Cleanup(func() { _ = k8s.Delete(ctx, crd) })
	installed := time.Now()
	ss := sealedSecret(ns, "db", map[string]any{"password": "AgBy3i4OJSWK+PiTySYZZA9rO43cGDEq", "user": "AgAAAA=="})
	g.Eventually(func() error { return k8s.Create(ctx, ss.DeepCopy()) }, wait, 100*time.Millisecond).Should(Succeed())
	waitEvent(t, ns, "db", sealed.ReasonCreated)
	t.Logf("SealedSecret reported %s after the CRD was created", time.Since(installed).Round(time.Millisecond))
	g.Eventually(func() []string { return events(t, ns, "db", sealed.ReasonCreated) }, wait, 50*time.Millisecond).
		Should(ConsistOf("SealedSecret created, keys: password, user"))
	g.Expect(sealedChanges(sealed.Created)).To(Equal(created + 1))

	// Its status and labels change: nothing to report. Then one key is
	// sealed again.
	fetch(t, ss)
	ss.Object["status"] = map[string]any{"observedGeneration": int64(1)}
	g.Expect(k8s.Status().Update(ctx, ss)).To(Succeed())
	edit(t, ss, func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"team": "shop"}) })
	edit(t, ss, func(u *unstructured.Unstructured) {
		g.Expect(unstructured.SetNestedField(u.Object, "AgCz0THER+CiPHeRtExT", "spec", "encryptedData", "password")).To(Succeed())
	})
	g.Eventually(func() []string { return events(t, ns, "db", sealed.ReasonUpdated) }, wait, 50*time.Millisecond).
		Should(ConsistOf("SealedSecret updated, keys: password"))
	g.Expect(sealedChanges(sealed.Updated)).To(Equal(updated+1), "the status and label changes are not reported")

	// The Secret is made from the SealedSecret.
	edit(t, sec, func(s *corev1.Secret) {
		s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "bitnami.com/v1alpha1", Kind: "SealedSecret", Name: "db", UID: ss.GetUID(), Controller: ptr.To(true)}}
		s.Data["password"] = []byte("s3cr3t-two")
	})
	waitRollouts(t, web, 1)
	g.Eventually(func() []string { return events(t, ns, "web", "Restarted") }, wait, 50*time.Millisecond).
		Should(ContainElement(HavePrefix("Restarted because Secret db (from SealedSecret db) changed (keys: password; ")))

	g.Expect(k8s.Delete(ctx, ss)).To(Succeed())
	g.Eventually(func() []string { return events(t, ns, "db", sealed.ReasonDeleted) }, wait, 50*time.Millisecond).
		Should(ConsistOf("SealedSecret deleted, keys: password, user"))
	g.Expect(sealedChanges(sealed.Deleted)).To(Equal(deleted + 1))

	for _, l := range w.logs.Lines("SealedSecret") {
		g.Expect(l).NotTo(Or(ContainSubstring("AgBy3i4"), ContainSubstring("AgCz0THER"), ContainSubstring("s3cr3t")), "a log line shows a ciphertext or a value")
	}

	if err := k8s.Delete(ctx, crd); err != nil {
		t.Fatal(err)
	}
	waitLog(t, w, `"msg"="Kind no longer served; stopped watching it"`, `"kind"="SealedSecret"`)
	stayReady(t, addr)
	g.Expect(w.logs.Lines("Reconciler error")).To(BeEmpty(), "logs:\n%s", w.logs)
}
