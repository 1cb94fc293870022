package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/controller"
	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/hold"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/producer"
	"github.com/watcher-dev/watcher/test/fixture"
)

// TestChangeSetSplitPairFailover (issue 30): a credential pair written 40 s
// apart, the username in a ConfigMap, then its password in a Secret, to a
// Deployment with watcher.dev/settle: 45s rolls out once, after the second
// write, carrying both (counted by ReplicaSets). The leader is killed
// while the set waits: the new leader resumes the same wait from the set
// kept on the Deployment. Two replicas in the lease mode, every other
// setting at its default (the debounce of 1s included).
func TestChangeSetSplitPairFailover(t *testing.T) {
	ns := namespace(t)
	user, pass := fixture.ConfigMap(ns, "user", map[string]string{"u": "a"}), fixture.Secret(ns, "pass", map[string]string{"p": "a"})
	create(t, user)
	create(t, pass)
	dep := fixture.Deployment(ns, "app", fixture.EnvFrom("user", "pass"))
	dep.Annotations = map[string]string{optin.Settle: "45s"}
	create(t, dep)
	args := []string{"--lock=lease", "--lease-duration=4s", "--lease-renew-deadline=3s", "--lease-retry-period=1s", "--coalesce=1s"}
	replicas := []*proc{startWatcher(t, "watcher-0", ns, args...), startWatcher(t, "watcher-1", ns, args...)}
	for _, p := range replicas {
		p.WaitReady(t)
	}
	leader := waitLeader(t, replicas)
	waitAdopted(t, dep)
	waitRunning(t, dep)
	g := NewWithT(t)
	g.Expect(replicaSets(t, dep)).To(Equal(1))

	setData(t, user, "u", "b")
	first := time.Now()
	g.Eventually(func() map[string]string { return get(t, &appsv1.Deployment{ObjectMeta: dep.ObjectMeta}).Annotations }, wait).
		Should(HaveKey(guard.PendingAnnotation), "the set waited for is kept on the Deployment")
	leader.Kill()
	standby := replicas[0]
	if standby == leader {
		standby = replicas[1]
	}
	g.Eventually(func() float64 { return metricValue(t, standby, "watcher_leader") }, wait, 100*time.Millisecond).Should(Equal(1.0), "the standby leads")
	time.Sleep(time.Until(first.Add(40 * time.Second)))
	g.Expect(replicaSets(t, dep)).To(Equal(1), "rolled before the second write")
	setData(t, pass, "p", "b")
	second := time.Now()
	g.Consistently(func() int { return replicaSets(t, dep) }, 40*time.Second, time.Second).Should(Equal(1), "rolled before the pair was quiet")
	g.Eventually(func() int { return replicaSets(t, dep) }, wait+10*time.Second, 200*time.Millisecond).Should(Equal(2))
	g.Expect(time.Since(second)).To(BeNumerically(">=", 44*time.Second))
	waitRunning(t, dep)
	g.Consistently(func() int { return replicaSets(t, dep) }, 3*time.Second, 200*time.Millisecond).Should(Equal(2), "one rollout in all")
	g.Expect(eventNote(t, ns, "Deployment", hold.ReasonChangeSetComplete)).To(And(ContainSubstring("ConfigMap user"), ContainSubstring("Secret pass")))
	g.Expect(eventNote(t, ns, "Deployment", "Restarted")).To(And(ContainSubstring("ConfigMap user"), ContainSubstring("Secret pass")))
	g.Expect(get(t, &appsv1.Deployment{ObjectMeta: dep.ObjectMeta}).Annotations).NotTo(HaveKey(guard.PendingAnnotation))
}

// TestChangeSetRelease (issue 30): one release (as `helm upgrade` applies
// it) writing a ConfigMap, a Secret and then the Deployment's template (a
// new image), all with one change-set id, rolls the Deployment once: its
// own new ReplicaSet, none added by watcher, which says so
// (ChangeSetInRelease). An edit of the ConfigMap by hand afterwards, its id
// unchanged, restarts as usual; ids that disagree wait for the settle's
// maximum, then roll once. Every setting at its default but the
// harness's (the debounce of 1s restored).
func TestChangeSetRelease(t *testing.T) {
	ns := namespace(t)
	user, pass := fixture.ConfigMap(ns, "user", map[string]string{"u": "a"}), fixture.Secret(ns, "pass", map[string]string{"p": "a"})
	user.Annotations = map[string]string{optin.ChangeSet: "1"}
	pass.Annotations = map[string]string{optin.ChangeSet: "1"}
	create(t, user)
	create(t, pass)
	dep := fixture.Deployment(ns, "app", fixture.EnvFrom("user", "pass"))
	dep.Annotations = map[string]string{optin.SettleMax: "5s"}
	dep.Spec.Template.Annotations = map[string]string{optin.ChangeSet: "1"}
	create(t, dep)
	w := startWatcher(t, "watcher", ns, "--coalesce=1s")
	w.WaitReady(t)
	waitAdopted(t, dep)
	waitRunning(t, dep)
	g := NewWithT(t)
	g.Expect(replicaSets(t, dep)).To(Equal(1))

	// Release 2, in Helm's order: the configuration, then the workload.
	setAnnotatedData(t, user, "u", "b", "2")
	setAnnotatedData(t, pass, "p", "b", "2")
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d := get(t, &appsv1.Deployment{ObjectMeta: dep.ObjectMeta})
		d.Spec.Template.Annotations[optin.ChangeSet] = "2"
		d.Spec.Template.Spec.Containers[0].Image = "app:2"
		return k8s.Update(ctx, d)
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() int { return replicaSets(t, dep) }, wait, 200*time.Millisecond).Should(Equal(2), "its own rollout")
	waitRunning(t, dep)
	g.Eventually(func() string { return eventNote(t, ns, "Deployment", controller.ReasonChangeSetInRelease) }, wait).ShouldNot(BeEmpty())
	g.Consistently(func() int { return replicaSets(t, dep) }, 5*time.Second, 200*time.Millisecond).Should(Equal(2), "watcher added a rollout to the release's")

	setData(t, user, "u", "c") // by hand: the id stays 2
	g.Eventually(func() int { return replicaSets(t, dep) }, wait, 200*time.Millisecond).Should(Equal(3), "a hand edit after the release restarts")
	waitRunning(t, dep)

	// Ids that disagree: the Secret says 3, the ConfigMap and the template
	// 2: held (Normal ChangeSetOpen) until its settle's maximum (5s), then
	// one rollout, with a Warning ChangeSetIncomplete.
	setAnnotatedData(t, pass, "p", "c", "3")
	g.Eventually(func() string { return eventNote(t, ns, "Deployment", hold.ReasonChangeSetOpen) }, wait).Should(ContainSubstring(`waiting for the whole change set "3"`))
	g.Consistently(func() int { return replicaSets(t, dep) }, 2*time.Second, 200*time.Millisecond).Should(Equal(3))
	g.Eventually(func() int { return replicaSets(t, dep) }, wait, 200*time.Millisecond).Should(Equal(4))
	g.Expect(eventNote(t, ns, "Deployment", hold.ReasonChangeSetIncomplete)).To(ContainSubstring(`ConfigMap user has "2"`))
}

// setAnnotatedData sets key to value and the change-set id to id in a
// ConfigMap or Secret, in one write.
func setAnnotatedData(t *testing.T, obj client.Object, key, value, id string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			o.Data[key] = value
		case *corev1.Secret:
			o.Data[key] = []byte(value)
		}
		ann := obj.GetAnnotations()
		ann[optin.ChangeSet] = id
		obj.SetAnnotations(ann)
		return k8s.Update(ctx, obj)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestChangeSetProducer (issue 30): a Deployment reading two Secrets
// written by External Secrets (its own CRD; the test writes the status
// External Secrets would) does not roll for the change of one while the
// ExternalSecret writing that very Secret reports an error, which a
// Warning names; the hold is bounded by --producer-timeout: then the
// Deployment rolls out once (ReplicaSets) with what has landed, and a
// Warning ProducerTimeout says so.
func TestChangeSetProducer(t *testing.T) {
	const timeout = 20 * time.Second
	ns := namespace(t)
	user, _, userSecret, _, dep := secretPair(t, ns, nil, "--producer-timeout="+timeout.String())
	g := NewWithT(t)

	setStatus(t, user, "Ready=False/SecretSyncedError")
	setData(t, userSecret, "v", "b") // the Secret changed, its producer in error
	changed := time.Now()
	g.Eventually(func() string { return eventNote(t, ns, "Deployment", hold.ReasonRestartHeld) }, wait).Should(
		And(ContainSubstring("(producer)"), ContainSubstring("ExternalSecret user"), ContainSubstring("SecretSyncedError")))
	g.Consistently(func() int { return replicaSets(t, dep) }, 3*time.Second, 200*time.Millisecond).Should(Equal(1))
	// watcher explain shows the set waited for and each producer's state.
	code, out := runWatcher(t, nil, "explain", "deployment/app", "-n", ns, "--watcher-namespace", ns)
	g.Expect(code).To(BeZero(), out)
	g.Expect(out).To(And(MatchRegexp(`Change set:\s+waiting since .*: Secret user`),
		MatchRegexp(`Producer:\s+ExternalSecret user writes Secret user: Failed \(ProducerFailed\)`),
		MatchRegexp(`Producer:\s+ExternalSecret pass writes Secret pass: Current`)))
	g.Eventually(func() int { return replicaSets(t, dep) }, timeout+wait, 200*time.Millisecond).Should(Equal(2), "rolled at the producers' timeout")
	g.Expect(time.Since(changed)).To(BeNumerically(">=", timeout-2*time.Second), "rolled before the producers' timeout")
	g.Expect(eventNote(t, ns, "Deployment", hold.ReasonProducerTimeout)).To(And(ContainSubstring("ExternalSecret user"), ContainSubstring("Secret user")))
	waitRunning(t, dep)
	g.Consistently(func() int { return replicaSets(t, dep) }, 3*time.Second, 200*time.Millisecond).Should(Equal(2))
}

// TestChangeSetProducerUnchanged: the ExternalSecret of a Secret the
// restart does not change reporting an error does not hold the restart
// for the change of the other Secret: the Deployment rolls out once
// (ReplicaSets), with a Warning ProducerFailed naming the failed
// ExternalSecret and its Secret.
func TestChangeSetProducerUnchanged(t *testing.T) {
	ns := namespace(t)
	_, pass, userSecret, _, dep := secretPair(t, ns, nil)
	g := NewWithT(t)

	setStatus(t, pass, "Ready=False/SecretSyncedError")
	setData(t, userSecret, "v", "b")
	g.Eventually(func() int { return replicaSets(t, dep) }, wait, 200*time.Millisecond).Should(Equal(2))
	g.Eventually(func() string { return eventNote(t, ns, "Deployment", hold.ReasonProducerFailed) }, wait).Should(
		And(ContainSubstring("ExternalSecret pass"), ContainSubstring("Secret pass"), ContainSubstring("SecretSyncedError")))
	g.Expect(eventNote(t, ns, "Deployment", hold.ReasonRestartHeld)).NotTo(ContainSubstring("(producer)"))
	waitRunning(t, dep)
	g.Consistently(func() int { return replicaSets(t, dep) }, 3*time.Second, 200*time.Millisecond).Should(Equal(2))
}

// externalSecret is an ExternalSecret of ns writing the Secret name, as a
// user would apply it.
func externalSecret(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"secretStoreRef": map[string]any{"kind": "SecretStore", "name": "vault"},
		"target":         map[string]any{"name": name},
		"data":           []any{map[string]any{"secretKey": "v", "remoteRef": map[string]any{"key": name}}},
	}}}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "external-secrets.io", Version: "v1", Kind: "ExternalSecret"})
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// setStatus writes the status of u through its status subresource, as
// its controller would, with the conditions conds ("Type=Status/Reason")
// at generation gen, and, for an ExternalSecret, the version synced now.
func setStatus(t *testing.T, u *unstructured.Unstructured, conds ...string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			return err
		}
		var cs []any
		for _, c := range conds {
			typ, rest, _ := strings.Cut(c, "=")
			st, reason, _ := strings.Cut(rest, "/")
			cs = append(cs, map[string]any{"type": typ, "status": st, "reason": reason, "message": reason,
				"observedGeneration": u.GetGeneration(), "lastTransitionTime": "2026-01-01T00:00:00Z"})
		}
		status := map[string]any{"conditions": cs}
		if u.GetKind() == "ExternalSecret" {
			status["syncedResourceVersion"] = producer.Version(u.GetGeneration(), u.GetLabels(), u.GetAnnotations())
		}
		u.Object["status"] = status
		return k8s.Status().Update(ctx, u)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestChangeSetSiblings (issue 30): with watcher.dev/refresh-siblings, the
// change of one Secret written by an ExternalSecret makes watcher ask the
// Deployment's other ExternalSecret to sync (force-sync); the Deployment
// rolls out once (ReplicaSets), after that sync, carrying both.
func TestChangeSetSiblings(t *testing.T) {
	ns := namespace(t)
	_, pass, userSecret, passSecret, dep := secretPair(t, ns, map[string]string{optin.RefreshSiblings: "true"})
	g := NewWithT(t)

	setData(t, userSecret, "v", "b")
	g.Eventually(func() map[string]string { return get(t, pass).GetAnnotations() }, wait).Should(HaveKey(producer.ForceSyncAnnotation))
	g.Consistently(func() int { return replicaSets(t, dep) }, 3*time.Second, 200*time.Millisecond).Should(Equal(1), "rolled before the sibling synced")
	setData(t, passSecret, "v", "b")
	setStatus(t, pass, "Ready=True/SecretSynced")
	g.Eventually(func() int { return replicaSets(t, dep) }, wait, 200*time.Millisecond).Should(Equal(2))
	waitRunning(t, dep)
	g.Consistently(func() int { return replicaSets(t, dep) }, 3*time.Second, 200*time.Millisecond).Should(Equal(2))
	g.Expect(eventNote(t, ns, "Deployment", "Restarted")).To(And(ContainSubstring("Secret user"), ContainSubstring("Secret pass")))
}

// TestChangeSetCertificates (issue 30): two Certificates of a Deployment
// (cert-manager's own CRD; the test writes the status cert-manager would)
// issued 15 s apart roll it out once (ReplicaSets), after the second.
func TestChangeSetCertificates(t *testing.T) {
	ns := namespace(t)
	installCRD(t, filepath.Join(hack(t, "crds.sh", "cert-manager"), "certificate-crd.yaml"),
		schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "CertificateList"}, ns)
	crt := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"secretName": name + "-tls", "dnsNames": []any{name + ".example.com"},
			"issuerRef": map[string]any{"name": "ca", "kind": "Issuer"},
		}}}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"})
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	web, api := crt("web"), crt("api")
	webTLS, apiTLS := fixture.Secret(ns, "web-tls", map[string]string{"tls.crt": "1"}), fixture.Secret(ns, "api-tls", map[string]string{"tls.crt": "1"})
	for _, o := range []client.Object{web, api, webTLS, apiTLS} {
		create(t, o)
	}
	setStatus(t, web, "Ready=True/Ready")
	setStatus(t, api, "Ready=True/Ready")
	spec := fixture.PodSpec(corev1.Container{Name: "app", Image: "app"},
		corev1.Volume{Name: "web", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "web-tls"}}},
		corev1.Volume{Name: "api", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "api-tls"}}})
	dep := fixture.Deployment(ns, "app", spec)
	dep.Annotations = map[string]string{optin.Settle: "20s"}
	create(t, dep)
	w := startWatcher(t, "watcher", ns, "--coalesce=1s")
	w.WaitReady(t)
	waitAdopted(t, dep)
	waitRunning(t, dep)
	g := NewWithT(t)

	setStatus(t, web, "Ready=True/Ready", "Issuing=True/Renewing")
	setData(t, webTLS, "tls.crt", "2")
	setStatus(t, web, "Ready=True/Ready")
	time.Sleep(15 * time.Second)
	setStatus(t, api, "Ready=True/Ready", "Issuing=True/Renewing")
	g.Consistently(func() int { return replicaSets(t, dep) }, 10*time.Second, 200*time.Millisecond).Should(Equal(1), "rolled while the second was issuing")
	setData(t, apiTLS, "tls.crt", "2")
	setStatus(t, api, "Ready=True/Ready")
	g.Eventually(func() int { return replicaSets(t, dep) }, 40*time.Second, 200*time.Millisecond).Should(Equal(2))
	waitRunning(t, dep)
	g.Consistently(func() int { return replicaSets(t, dep) }, 3*time.Second, 200*time.Millisecond).Should(Equal(2))
}

// secretPair creates a Deployment (annotated with annotations) reading the
// Secrets user and pass, each written by the ExternalSecret of its name
// (External Secrets' own CRD installed), both synced, and starts watcher
// with its debounce of 1s and the flags args; it returns once the
// Deployment is adopted and running.
func secretPair(t *testing.T, ns string, annotations map[string]string, args ...string) (user, pass *unstructured.Unstructured, userSecret, passSecret *corev1.Secret, dep *appsv1.Deployment) {
	t.Helper()
	installCRD(t, filepath.Join(hack(t, "crds.sh", "external-secrets"), "externalsecret-crd.yaml"),
		schema.GroupVersionKind{Group: "external-secrets.io", Version: "v1", Kind: "ExternalSecretList"}, ns)
	user, pass = externalSecret(ns, "user"), externalSecret(ns, "pass")
	userSecret, passSecret = fixture.Secret(ns, "user", map[string]string{"v": "a"}), fixture.Secret(ns, "pass", map[string]string{"v": "a"})
	for _, o := range []client.Object{user, pass, userSecret, passSecret} {
		create(t, o)
	}
	setStatus(t, user, "Ready=True/SecretSynced")
	setStatus(t, pass, "Ready=True/SecretSynced")
	spec := fixture.PodSpec(corev1.Container{Name: "app", Image: "app", EnvFrom: []corev1.EnvFromSource{
		{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "user"}}},
		{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "pass"}}},
	}})
	dep = fixture.Deployment(ns, "app", spec)
	dep.Annotations = annotations
	create(t, dep)
	w := startWatcher(t, "watcher", ns, append([]string{"--coalesce=1s"}, args...)...)
	w.WaitReady(t)
	waitAdopted(t, dep)
	waitRunning(t, dep)
	return user, pass, userSecret, passSecret, dep
}

// TestReleaseWithoutIDs (issue 36): a release that sets no change-set id,
// in `kubectl apply -f dir/` order (the ConfigMap, then the Deployment's
// new image, at once), rolls the Deployment once: its own ReplicaSet,
// none added by watcher, which says so (Released). Written the other way
// round (the template first, the ConfigMap after it), or with only a
// scale after the change, the pods could not read the new content:
// watcher restarts. Every setting at its default but the harness's.
func TestReleaseWithoutIDs(t *testing.T) {
	ns := namespace(t)
	cm := fixture.ConfigMap(ns, "app", map[string]string{"v": "1"})
	create(t, cm)
	dep := fixture.Deployment(ns, "app", fixture.EnvFrom("app", ""))
	create(t, dep)
	w := startWatcher(t, "watcher", ns, "--coalesce=1s")
	w.WaitReady(t)
	waitAdopted(t, dep)
	waitRunning(t, dep)
	g := NewWithT(t)
	g.Expect(replicaSets(t, dep)).To(Equal(1))

	// The configuration, then the workload.
	setData(t, cm, "v", "2")
	setImage(t, dep, "app:2")
	g.Eventually(func() string { return eventNote(t, ns, "Deployment", controller.ReasonReleased) }, wait).
		Should(ContainSubstring("the pod template was written after ConfigMap app"))
	g.Consistently(func() int { return replicaSets(t, dep) }, 4*time.Second, 200*time.Millisecond).Should(Equal(2), "watcher added a rollout to the release's")
	waitRunning(t, dep)

	// The workload, then the configuration: its pods may have started
	// before the change.
	setImage(t, dep, "app:3")
	setData(t, cm, "v", "3")
	g.Eventually(func() int { return replicaSets(t, dep) }, wait, 200*time.Millisecond).Should(Equal(4), "the image's and watcher's")
	waitRunning(t, dep)
	g.Consistently(func() int { return replicaSets(t, dep) }, 3*time.Second, 200*time.Millisecond).Should(Equal(4))

	// A scale is no release.
	setData(t, cm, "v", "4")
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d := get(t, &appsv1.Deployment{ObjectMeta: dep.ObjectMeta})
		d.Spec.Replicas = ptr.To(*d.Spec.Replicas + 1)
		return k8s.Update(ctx, d)
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() int { return replicaSets(t, dep) }, wait, 200*time.Millisecond).Should(Equal(5), "restarted")
}
