package integration

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/watcher-dev/watcher/api/v1alpha1"
	"github.com/watcher-dev/watcher/internal/controller"
	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/hold"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/policy"
	"github.com/watcher-dev/watcher/internal/producer"
	"github.com/watcher-dev/watcher/test/observe"
)

// TestChangeSet: a workload with watcher.dev/settle reading a ConfigMap
// and a Secret written 3 s apart (a username, then its password) rolls out
// once, after the second, once both have been quiet for its settle, and
// says so (ChangeSetOpen, ChangeSetComplete naming both); one without it
// rolls at each write; the set waited for is gone from the workload after.
func TestChangeSet(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	user, pass := configMap(ns, "user", map[string]string{"u": "a"}), secret(ns, "pass", map[string]string{"p": "a"})
	create(t, user)
	create(t, pass)
	settled := track(t, annotated(ns, "settled", envFrom("user", "pass"), map[string]string{optin.Settle: "5s"}))
	plain := track(t, deployment(ns, "plain", envFrom("user", "pass")))
	startWatcher(t, ns)
	waitAdopted(t, deployment(ns, "settled", envFrom("user", "pass")))
	waitAdopted(t, deployment(ns, "plain", envFrom("user", "pass")))

	setConfigMap(t, user, "u", "b")
	waitRollouts(t, plain, 1)
	time.Sleep(3 * time.Second)
	setSecret(t, pass, "p", "b")
	second := time.Now()
	waitRollouts(t, plain, 2)
	stayRollouts(t, settled, 0)
	waitRollouts(t, settled, 1)
	g := NewWithT(t)
	g.Expect(time.Since(second)).To(BeNumerically(">=", 4*time.Second), "rolled before the second write was quiet")
	stayRollouts(t, settled, 1)
	g.Expect(events(t, ns, "settled", hold.ReasonChangeSetOpen)).NotTo(BeEmpty())
	g.Expect(events(t, ns, "settled", hold.ReasonChangeSetComplete)).To(ContainElement(
		And(ContainSubstring("ConfigMap user"), ContainSubstring("Secret pass"))))
	g.Expect(fetch(t, &appsv1.Deployment{ObjectMeta: meta(ns, "settled")}).Annotations).NotTo(HaveKey(guard.PendingAnnotation))
}

// TestChangeSetResumed: watcher stopped while a workload waits for its
// change set, and started again, resumes the same wait from the set kept
// on the workload: the second part of the change, written after the new
// start, joins it, and the workload rolls out once in all.
func TestChangeSetResumed(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	user, pass := configMap(ns, "user", map[string]string{"u": "a"}), secret(ns, "pass", map[string]string{"p": "a"})
	create(t, user)
	create(t, pass)
	dep := annotated(ns, "app", envFrom("user", "pass"), map[string]string{optin.Settle: "8s"})
	app := track(t, dep)
	w := startWatcher(t, ns)
	waitAdopted(t, deployment(ns, "app", envFrom("user", "pass")))

	setConfigMap(t, user, "u", "b")
	g := NewWithT(t)
	g.Eventually(func() map[string]string {
		return fetch(t, &appsv1.Deployment{ObjectMeta: meta(ns, "app")}).Annotations
	}, wait).Should(HaveKey(guard.PendingAnnotation), "the set waited for is kept on the workload")
	w.Stop()
	startWatcher(t, ns)
	stayRollouts(t, app, 0)
	setSecret(t, pass, "p", "b")
	waitRollouts(t, app, 1)
	stayRollouts(t, app, 1)
	g.Expect(events(t, ns, "app", hold.ReasonChangeSetComplete)).To(ContainElement(
		And(ContainSubstring("ConfigMap user"), ContainSubstring("Secret pass"))))
}

// TestChangeSetProducer: a workload reading two Secrets written by
// External Secrets (its own CRD; the test writes the status External
// Secrets would) does not restart for the change of one while the
// ExternalSecret writing that very Secret reports an error: a Warning
// RestartHeld (producer) names it; the hold is bounded by
// --producer-timeout, after which the workload rolls out once with what
// has landed, and a Warning ProducerTimeout says so.
//
// Not parallel: the CRD is cluster-wide.
func TestChangeSetProducer(t *testing.T) {
	const timeout = 15 * time.Second
	ns := namespace(t)
	sc := newSecretPair(t, ns, nil, func(o *options.Options) { o.ProducerTimeout = timeout })
	user, userSecret, app := sc.user, sc.userSecret, sc.app

	setStatus(t, user, map[string]any{"conditions": conditions(condition("Ready", "False", "SecretSyncedError")), "syncedResourceVersion": esVersion(t, user)})
	setSecret(t, userSecret, "v", "b") // the Secret changed, its producer in error
	changed := time.Now()
	g := NewWithT(t)
	g.Eventually(func() []string { return events(t, ns, "app", hold.ReasonRestartHeld) }, wait).Should(ContainElement(
		And(ContainSubstring("(producer)"), ContainSubstring("ExternalSecret user"), ContainSubstring("SecretSyncedError"))))
	stayRollouts(t, app, 0)
	g.Eventually(app.Count, timeout+wait, 100*time.Millisecond).Should(Equal(1), "rolled out at the producers' timeout")
	g.Expect(time.Since(changed)).To(BeNumerically(">=", timeout-2*time.Second), "rolled before the producers' timeout")
	g.Expect(events(t, ns, "app", hold.ReasonProducerTimeout)).To(ContainElement(
		And(ContainSubstring("ExternalSecret user"), ContainSubstring("Secret user"))))
	stayRollouts(t, app, 1)
}

// TestChangeSetProducerUnchanged: the ExternalSecret of a Secret the
// restart does not change reporting an error does not hold the restart
// for the change of the other Secret (the pods read the unchanged one as
// it is either way): the workload rolls out once, with a Warning
// ProducerFailed naming the failed ExternalSecret and its Secret.
//
// Not parallel: the CRD is cluster-wide.
func TestChangeSetProducerUnchanged(t *testing.T) {
	ns := namespace(t)
	sc := newSecretPair(t, ns, nil)
	pass, userSecret, app := sc.pass, sc.userSecret, sc.app

	setStatus(t, pass, map[string]any{"conditions": conditions(condition("Ready", "False", "SecretSyncedError")), "syncedResourceVersion": esVersion(t, pass)})
	setSecret(t, userSecret, "v", "b") // External Secrets synced the user
	waitRollouts(t, app, 1)
	g := NewWithT(t)
	g.Eventually(func() []string { return events(t, ns, "app", hold.ReasonProducerFailed) }, wait).Should(ContainElement(
		And(ContainSubstring("ExternalSecret pass"), ContainSubstring("Secret pass"), ContainSubstring("SecretSyncedError"))))
	g.Expect(events(t, ns, "app", hold.ReasonRestartHeld)).NotTo(ContainElement(ContainSubstring("(producer)")))
	stayRollouts(t, app, 1)
}

// TestChangeSetSiblings: with watcher.dev/refresh-siblings, the change of
// one Secret written by an ExternalSecret makes watcher ask the workload's
// other ExternalSecret to sync (its force-sync annotation), once, and the
// workload rolls out once, after that sync, carrying both Secrets' new
// values.
//
// Not parallel: the CRD is cluster-wide.
func TestChangeSetSiblings(t *testing.T) {
	ns := namespace(t)
	sc := newSecretPair(t, ns, map[string]string{optin.RefreshSiblings: "true"})
	user, pass, userSecret, passSecret, app, synced := sc.user, sc.pass, sc.userSecret, sc.passSecret, sc.app, sc.synced

	setSecret(t, userSecret, "v", "b") // External Secrets synced the user
	g := NewWithT(t)
	g.Eventually(func() map[string]string { return fetchU(t, pass).GetAnnotations() }, wait).Should(HaveKey(producer.ForceSyncAnnotation),
		"the other ExternalSecret is asked to sync")
	g.Expect(fetchU(t, user).GetAnnotations()).NotTo(HaveKey(producer.ForceSyncAnnotation), "the one that changed is not")
	g.Expect(events(t, ns, "app", hold.ReasonSiblingsRefreshed)).To(ContainElement(ContainSubstring("ExternalSecret pass")))
	stayRollouts(t, app, 0)
	// External Secrets syncs the password: a new value, then its status.
	setSecret(t, passSecret, "v", "b")
	stayRollouts(t, app, 0)
	synced(pass)
	waitRollouts(t, app, 1)
	stayRollouts(t, app, 1)
	g.Expect(events(t, ns, "app", hold.ReasonSiblingsRefreshed)).To(HaveLen(1), "asked once per change set")
}

// TestChangeSetRelease: a release (one `helm upgrade`) writing a ConfigMap
// and a Secret, then the workload's template (a new image), all with one
// change-set id, rolls the workload once: its own rollout; watcher records
// the change without adding one, and says so. A later edit of the ConfigMap
// by hand (its id unchanged) restarts as usual. Ids that disagree hold the
// restart until they agree or the settle's maximum.
func TestChangeSetRelease(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	user, pass := configMap(ns, "user", map[string]string{"u": "a"}), secret(ns, "pass", map[string]string{"p": "a"})
	user.Annotations = map[string]string{optin.ChangeSet: "1"}
	pass.Annotations = map[string]string{optin.ChangeSet: "1"}
	create(t, user)
	create(t, pass)
	dep := annotated(ns, "app", envFrom("user", "pass"), map[string]string{optin.SettleMax: "5s"})
	dep.Spec.Template.Annotations = map[string]string{optin.ChangeSet: "1"}
	app := track(t, dep)
	startWatcher(t, ns)
	waitAdopted(t, deployment(ns, "app", envFrom("user", "pass")))
	g := NewWithT(t)
	g.Expect(fetch(t, &appsv1.Deployment{ObjectMeta: meta(ns, "app")}).Annotations).To(HaveKeyWithValue(optin.RecordedChangeSet, "1"))

	// Release 2: the configuration first, then the template (Helm's order).
	edit(t, user, func(cm *corev1.ConfigMap) { cm.Data["u"], cm.Annotations[optin.ChangeSet] = "b", "2" })
	edit(t, pass, func(s *corev1.Secret) { s.Data["p"], s.Annotations[optin.ChangeSet] = []byte("b"), "2" })
	stayRollouts(t, app, 0)
	edit(t, dep, func(d *appsv1.Deployment) {
		d.Spec.Template.Annotations[optin.ChangeSet] = "2"
		d.Spec.Template.Spec.Containers[0].Image = "app:2"
	})
	waitRollouts(t, app, 1) // its own
	g.Eventually(func() map[string]string {
		return fetch(t, &appsv1.Deployment{ObjectMeta: meta(ns, "app")}).Annotations
	}, wait).Should(HaveKeyWithValue(optin.RecordedChangeSet, "2"))
	stayRollouts(t, app, 1)
	g.Expect(events(t, ns, "app", controller.ReasonChangeSetInRelease)).NotTo(BeEmpty())

	// By hand, outside a release: a restart.
	setConfigMap(t, user, "u", "c")
	waitRollouts(t, app, 2)

	// Ids that disagree: the Secret says 3, the ConfigMap and the template
	// 2: held until the maximum, then one restart.
	edit(t, pass, func(s *corev1.Secret) { s.Data["p"], s.Annotations[optin.ChangeSet] = []byte("c"), "3" })
	g.Eventually(func() []string { return events(t, ns, "app", hold.ReasonChangeSetOpen) }, wait).Should(ContainElement(
		ContainSubstring(`waiting for the whole change set "3"`)))
	stayRollouts(t, app, 2)
	waitRollouts(t, app, 3)
	stayRollouts(t, app, 3)
}

// TestChangeSetPolicy: a ReloadPolicy's settle applies to the workloads
// it restarts: its ConfigMap and Secret written 2 s apart roll it once,
// after the second was quiet for the policy's settle.
func TestChangeSetPolicy(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	user, pass := configMap(ns, "user", map[string]string{"u": "a"}), secret(ns, "pass", map[string]string{"p": "a"})
	create(t, user)
	create(t, pass)
	app := track(t, deployment(ns, "app", envFrom("user", "pass")))
	p := reloadPolicy(ns, "pair", []v1alpha1.Source{{Kind: v1alpha1.SourceConfigMap, Name: "user"}, {Kind: v1alpha1.SourceSecret, Name: "pass"}})
	p.Spec.Settle = &metav1.Duration{Duration: 5 * time.Second}
	c := policies(t)
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	startWatcher(t, ns)
	waitAdopted(t, deployment(ns, "app", envFrom("user", "pass")))
	waitReady(t, c, p, metav1.ConditionTrue, policy.ReasonValid)

	setConfigMap(t, user, "u", "b")
	time.Sleep(2 * time.Second)
	setSecret(t, pass, "p", "b")
	second := time.Now()
	stayRollouts(t, app, 0)
	waitRollouts(t, app, 1)
	NewWithT(t).Expect(time.Since(second)).To(BeNumerically(">=", 4*time.Second), "rolled before the policy's settle")
	stayRollouts(t, app, 1)
}

// TestChangeSetOwner: a workload whose ConfigMap is written by a custom
// resource reporting kstatus-style status (its controller owner, read when
// asked) does not restart for the change of that ConfigMap while that
// owner reports an error; once it is Ready at its generation, the
// workload rolls out once (it is asked again every 15 s: nothing tells of
// its progress). (The owner's error does not hold the change of the
// workload's other ConfigMap: TestChangeSetProducerUnchanged.)
//
// Not parallel: the CRD is cluster-wide.
func TestChangeSetOwner(t *testing.T) {
	ns := namespace(t)
	installCRD(t, databaseCRD(), databaseGVK, ns)
	pg := producerObject(databaseGVK, ns, "pg", map[string]any{"size": "small"})
	create(t, pg)
	setStatus(t, pg, map[string]any{"observedGeneration": int64(1), "conditions": conditions(condition("Ready", "True", "Succeeded"))})
	conn := configMap(ns, "pg-conn", map[string]string{"host": "pg"})
	conn.OwnerReferences = []metav1.OwnerReference{{APIVersion: databaseGVK.GroupVersion().String(), Kind: "Database", Name: "pg", UID: fetchU(t, pg).GetUID(), Controller: ptr.To(true)}}
	cfg := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, conn, cfg)
	spec := podSpec(corev1.Container{Name: "app", Image: "app", EnvFrom: []corev1.EnvFromSource{
		{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "pg-conn"}}},
		{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}},
	}})
	app := track(t, deployment(ns, "app", spec))
	startWatcher(t, ns)
	waitAdopted(t, deployment(ns, "app", spec))

	setStatus(t, pg, map[string]any{"observedGeneration": int64(1), "conditions": conditions(condition("Ready", "False", "AuthFailed"))})
	setConfigMap(t, conn, "host", "pg2") // the ConfigMap its failing owner writes
	g := NewWithT(t)
	g.Eventually(func() []string { return events(t, ns, "app", hold.ReasonRestartHeld) }, wait).Should(ContainElement(
		And(ContainSubstring("(producer)"), ContainSubstring("Database pg"), ContainSubstring("AuthFailed"))))
	stayRollouts(t, app, 0)
	setStatus(t, pg, map[string]any{"observedGeneration": int64(1), "conditions": conditions(condition("Ready", "True", "Succeeded"))})
	g.Eventually(app.Count, 30*time.Second, 100*time.Millisecond).Should(Equal(1), "rolled out once the owner is Ready")
	stayRollouts(t, app, 1)
}

// TestChangeSetCertificates: two Certificates (cert-manager's own CRD; the
// test writes the status cert-manager would) of one workload issued 15 s
// apart roll it out once, after the second: the first's Secret waits for
// the settle (20 s), during which the second starts issuing, and the
// restart then waits for its issuance too.
//
// Not parallel: the CRD is cluster-wide.
func TestChangeSetCertificates(t *testing.T) {
	ns := namespace(t)
	installCRD(t, cachedCRD(t, "certificate-crd.yaml", "cert-manager"), certificateGVK, ns)
	crt := func(name string) *unstructured.Unstructured {
		return producerObject(certificateGVK, ns, name, map[string]any{
			"secretName": name + "-tls", "dnsNames": []any{name + ".example.com"},
			"issuerRef": map[string]any{"name": "ca", "kind": "Issuer"},
		})
	}
	web, api := crt("web"), crt("api")
	webTLS, apiTLS := secret(ns, "web-tls", map[string]string{"tls.crt": "1"}), secret(ns, "api-tls", map[string]string{"tls.crt": "1"})
	create(t, web, api, webTLS, apiTLS)
	ready := func(u *unstructured.Unstructured) {
		setStatus(t, u, map[string]any{"conditions": conditions(condition("Ready", "True", "Ready", 1))})
	}
	issuing := func(u *unstructured.Unstructured) {
		setStatus(t, u, map[string]any{"conditions": conditions(condition("Ready", "True", "Ready", 1), condition("Issuing", "True", "Renewing", 1))})
	}
	ready(web)
	ready(api)
	spec := podSpec(corev1.Container{Name: "app", Image: "app"},
		corev1.Volume{Name: "web", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "web-tls"}}},
		corev1.Volume{Name: "api", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "api-tls"}}})
	app := track(t, annotated(ns, "app", spec, map[string]string{optin.Settle: "20s"}))
	startWatcher(t, ns)
	waitAdopted(t, deployment(ns, "app", spec))

	issuing(web)
	setSecret(t, webTLS, "tls.crt", "2")
	ready(web)
	time.Sleep(15 * time.Second)
	issuing(api)
	stayRollouts(t, app, 0)
	time.Sleep(10 * time.Second) // past the first's settle: the issuance holds it
	stayRollouts(t, app, 0)
	setSecret(t, apiTLS, "tls.crt", "2")
	ready(api)
	NewWithT(t).Eventually(app.Count, 30*time.Second, 100*time.Millisecond).Should(Equal(1))
	stayRollouts(t, app, 1)
}

// secretPair is a workload (annotated with annotations) reading the
// Secrets user and pass, each written by the ExternalSecret of its name
// (External Secrets' own CRD installed), both synced, with watcher
// started (its options changed by the modify of newSecretPair) and the
// workload adopted.
type secretPair struct {
	user, pass             *unstructured.Unstructured
	userSecret, passSecret *corev1.Secret
	app                    *observe.Tracker
	// synced writes the status External Secrets writes after a sync.
	synced func(*unstructured.Unstructured)
}

func newSecretPair(t *testing.T, ns string, annotations map[string]string, modify ...func(*options.Options)) secretPair {
	t.Helper()
	installCRD(t, cachedCRD(t, "externalsecret-crd.yaml", "external-secrets"), externalSecretGVK, ns)
	es := func(name string) *unstructured.Unstructured {
		return producerObject(externalSecretGVK, ns, name, map[string]any{
			"secretStoreRef": map[string]any{"kind": "SecretStore", "name": "vault"},
			"target":         map[string]any{"name": name},
			"data":           []any{map[string]any{"secretKey": "v", "remoteRef": map[string]any{"key": name}}},
		})
	}
	sc := secretPair{user: es("user"), pass: es("pass"),
		userSecret: secret(ns, "user", map[string]string{"v": "a"}), passSecret: secret(ns, "pass", map[string]string{"v": "a"})}
	create(t, sc.user, sc.pass, sc.userSecret, sc.passSecret)
	sc.synced = func(u *unstructured.Unstructured) {
		setStatus(t, u, map[string]any{"conditions": conditions(condition("Ready", "True", "SecretSynced")), "syncedResourceVersion": esVersion(t, u)})
	}
	sc.synced(sc.user)
	sc.synced(sc.pass)
	spec := podSpec(corev1.Container{Name: "app", Image: "app", EnvFrom: []corev1.EnvFromSource{
		{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "user"}}},
		{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "pass"}}},
	}})
	sc.app = track(t, annotated(ns, "app", spec, annotations))
	startWatcher(t, ns, modify...)
	waitAdopted(t, deployment(ns, "app", spec))
	return sc
}
