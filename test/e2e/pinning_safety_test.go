package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/watcher-dev/watcher/internal/controller"
	"github.com/watcher-dev/watcher/internal/explain"
	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/snapshot"
	"github.com/watcher-dev/watcher/test/fixture"
)

// TestPinnedFloating (issue 31): credentials float. A pinned Deployment
// reading a ConfigMap, a ConfigMap annotated watcher.dev/pin: "false" and
// a cert-manager certificate's Secret rolls once when all three change:
// only the first is pinned, its pods read the other two live; a change of
// the certificate alone still restarts it, its pins unchanged; explain
// shows each source as pinned or floating.
func TestPinnedFloating(t *testing.T) {
	s := newPinnedScene(t)
	g := NewWithT(t)
	flags := fixture.ConfigMap(s.ns, "flags", map[string]string{"f": "1"})
	flags.Annotations = map[string]string{pin.Annotation: "false"}
	tls := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "tls", Annotations: map[string]string{"cert-manager.io/certificate-name": "edge"}},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": []byte("c1"), "tls.key": []byte("k1")}}
	create(t, flags)
	create(t, tls)
	spec := fixture.EnvFrom("app", "")
	spec.Containers[0].EnvFrom = append(spec.Containers[0].EnvFrom, corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "flags"}}})
	spec.Volumes = []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls"}}}}
	edge := fixture.Deployment(s.ns, "edge", spec)
	edge.Annotations = map[string]string{pin.Annotation: "true"}
	create(t, edge)
	waitAdopted(t, edge)
	waitRunning(t, edge)

	setData(t, s.cm, "mode", "v2")
	setData(t, flags, "f", "2")
	setData(t, tls, "tls.key", "k2")
	g.Eventually(func() int { return revisionOf(t, edge) }, wait).Should(Equal(2))
	waitRunning(t, edge)
	g.Consistently(func() int { return revisionOf(t, edge) }, 3*time.Second, 200*time.Millisecond).Should(Equal(2), "one rollout")
	pins := templatePins(t, edge)
	g.Expect(pins).To(HaveLen(1))
	g.Expect(pins).To(HaveKey(appSource))
	for _, p := range podsOf(t, edge) {
		g.Expect(p.Spec.Containers[0].EnvFrom[0].ConfigMapRef.Name).To(Equal(pins[appSource]))
		g.Expect(p.Spec.Containers[0].EnvFrom[1].ConfigMapRef.Name).To(Equal("flags"), "floats")
		g.Expect(p.Spec.Volumes[0].Secret.SecretName).To(Equal("tls"), "floats")
	}

	setData(t, tls, "tls.key", "k3")
	g.Eventually(func() int { return revisionOf(t, edge) }, wait).Should(Equal(3), "a floating source still restarts")
	g.Expect(templatePins(t, edge)).To(Equal(pins))

	code, out := runWatcher(t, nil, "explain", "deployment/edge", "-n", s.ns, "--watcher-namespace", s.ns, "-o", "json")
	g.Expect(code).To(BeZero(), out)
	var rep explain.WorkloadReport
	g.Expect(json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &rep)).To(Succeed(), out)
	states := map[string]string{}
	for _, u := range rep.Uses {
		if u.Pin != nil {
			states[u.Kind+"/"+u.Name] = u.Pin.State + " " + u.Pin.Snapshot + u.Pin.Reason
		}
	}
	g.Expect(states).To(Equal(map[string]string{
		"ConfigMap/app":   "pinned " + pins[appSource],
		"ConfigMap/flags": "floating " + pin.Annotation + `: "false"`,
		"Secret/tls":      "floating a cert-manager certificate",
	}))
}

// TestPinnedOldPodsImmune (issue 31): the pods of an older pinned revision
// keep reading their own snapshot whatever happens to the live ConfigMap:
// with the rollout of a new revision stalled (the Deployment paused, as a
// failed rollout leaves it: the old ReplicaSet still runs), a deleted old
// pod comes back reading the old snapshot, never the live object.
func TestPinnedOldPodsImmune(t *testing.T) {
	s := newPinnedScene(t)
	g := NewWithT(t)
	setData(t, s.cm, "mode", "v2")
	g.Eventually(func() int { return s.revision(t) }, wait).Should(Equal(2))
	waitRunning(t, s.dep)
	old := s.template(t)[appSource]
	g.Eventually(func() []string { return s.podsRead(t) }, wait).Should(HaveEach(HavePrefix(old + ",")))

	pause := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"paused":true}}`))
	g.Expect(k8s.Patch(ctx, &appsv1.Deployment{ObjectMeta: s.dep.ObjectMeta}, pause)).To(Succeed())
	setData(t, s.cm, "mode", "bad")
	g.Eventually(func() string { return s.template(t)[appSource] }, wait).ShouldNot(Equal(old), "restarted onto the bad content")
	g.Expect(s.revision(t)).To(Equal(2), "paused: the new revision does not roll")
	victim := s.pods(t)[0]
	g.Expect(k8s.Delete(ctx, &victim)).To(Succeed())
	g.Eventually(func() []string {
		var names []string
		for _, p := range s.pods(t) {
			if p.Name != victim.Name {
				names = append(names, p.Name)
			}
		}
		return names
	}, wait).Should(HaveLen(2), "the old ReplicaSet replaces the pod")
	g.Expect(s.podsRead(t)).To(HaveEach(HavePrefix(old+",")), "every pod, the new one included, reads the old snapshot")
}

// TestPinnedGitOps (issue 31): re-applying the same manifest, client-side
// (kubectl apply) and server-side (as Argo CD and Flux do), makes no
// rollout and keeps the pins; a tool that strips the pins, or a manifest
// copied from elsewhere whose pins name snapshots that do not exist here,
// makes watcher pin again, with one rollout and a Warning.
func TestPinnedGitOps(t *testing.T) {
	s := newPinnedScene(t)
	g := NewWithT(t)
	setData(t, s.cm, "mode", "v2")
	g.Eventually(func() int { return s.revision(t) }, wait).Should(Equal(2))
	waitRunning(t, s.dep)
	pins := s.template(t)

	manifest := s.dep.DeepCopy()
	manifest.ObjectMeta = metav1.ObjectMeta{Namespace: s.ns, Name: "web", Annotations: map[string]string{pin.Annotation: "true"}}
	manifest.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
	manifest.Status = appsv1.DeploymentStatus{}
	text, err := yaml.Marshal(manifest)
	g.Expect(err).NotTo(HaveOccurred())
	file := filepath.Join(t.TempDir(), "web.yaml")
	g.Expect(os.WriteFile(file, text, 0o600)).To(Succeed())
	for _, mode := range [][]string{{"apply", "-f", file}, {"apply", "--server-side", "--force-conflicts", "--field-manager=argocd-controller", "-f", file}} {
		out, err := exec.Command(kube.BinDir+"/kubectl", append([]string{"--kubeconfig", kube.Kubeconfig}, mode...)...).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
		g.Consistently(func() int { return s.revision(t) }, 3*time.Second, 200*time.Millisecond).Should(Equal(2), "re-applied: no rollout (%v)", mode)
		g.Expect(s.template(t)).To(Equal(pins), "pins kept (%v)", mode)
	}

	strip := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/spec/template/metadata/annotations/watcher.dev~1pins"}]`))
	g.Expect(k8s.Patch(ctx, &appsv1.Deployment{ObjectMeta: s.dep.ObjectMeta}, strip)).To(Succeed())
	g.Eventually(func() string { return eventNote(t, s.ns, "Deployment", controller.ReasonPinsStripped) }, wait).ShouldNot(BeEmpty())
	g.Eventually(func() pin.Pins { return s.template(t) }, wait).Should(Equal(pins), "pinned again, to the same snapshots")
	waitRunning(t, s.dep)
	// The strip rolled (revision 3), pinning again rolled once (4).
	g.Eventually(func() int { return s.revision(t) }, wait).Should(Equal(4))
	g.Consistently(func() int { return s.revision(t) }, 3*time.Second, 200*time.Millisecond).Should(Equal(4))

	// A manifest copied from elsewhere pins snapshots that do not exist
	// here (its pods could not start): watcher pins again, once.
	foreign := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"template":{"metadata":{"annotations":{"watcher.dev/pins":"configmap/app=app-pin-00000000000000000000"}}}}}`))
	g.Expect(k8s.Patch(ctx, &appsv1.Deployment{ObjectMeta: s.dep.ObjectMeta}, foreign)).To(Succeed())
	g.Eventually(func() string { return eventNote(t, s.ns, "Deployment", controller.ReasonPinsStripped) }, wait).Should(ContainSubstring("do not exist: configmap app-pin-00000000000000000000"))
	g.Eventually(func() pin.Pins { return s.template(t) }, wait).Should(Equal(pins))
	g.Eventually(func() int { return s.revision(t) }, wait).Should(Equal(6))
	waitRunning(t, s.dep)
	g.Consistently(func() int { return s.revision(t) }, 3*time.Second, 200*time.Millisecond).Should(Equal(6))
}

// TestPinnedRefusals (issue 31): with the policy's binding deleted,
// pinning is off: the next restart is made unpinned (its pods read the
// live objects) with a Warning and the metric at 0, and pods of a pinned
// revision that come up then are reported unpinned; a snapshot's name
// taken by another object leaves that object untouched and its source
// live, with a Warning.
func TestPinnedRefusals(t *testing.T) {
	s := newPinnedScene(t)
	g := NewWithT(t)

	// A squatter holds the name the next content of app would get.
	var keySecret corev1.Secret
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: "watcher-hash-key"}, &keySecret)).To(Succeed())
	key, err := hash.KeyOf(&keySecret)
	g.Expect(err).NotTo(HaveOccurred())
	next := hash.NewHasher(key).Of(hash.Source{Kind: "ConfigMap", Namespace: s.ns, Name: "app"}, map[string][]byte{"mode": []byte("v2")})
	squatter := fixture.ConfigMap(s.ns, pin.SnapshotName("app", next.Sum), map[string]string{"mine": "yes"})
	create(t, squatter)
	setData(t, s.cm, "mode", "v2")
	g.Eventually(func() int { return s.revision(t) }, wait).Should(Equal(2))
	g.Eventually(func() string { return eventNote(t, s.ns, "Deployment", controller.ReasonPinNameTaken) }, wait).Should(ContainSubstring("configmap app"))
	g.Expect(s.template(t)).NotTo(HaveKey(appSource))
	g.Expect(s.template(t)).To(HaveKey(dbSource))
	after := get(t, &corev1.ConfigMap{ObjectMeta: squatter.ObjectMeta})
	g.Expect(after.Data).To(Equal(map[string]string{"mine": "yes"}))
	g.Expect(after.OwnerReferences).To(BeEmpty())
	waitRunning(t, s.dep)
	g.Eventually(func() []string { return s.podsRead(t) }, wait).Should(HaveEach(HavePrefix("app,")), "app read live")

	// What watcher wrote on the template (db pinned, signed), for a
	// Deployment of the same revision below.
	signed := get(t, &appsv1.Deployment{ObjectMeta: s.dep.ObjectMeta}).Spec.Template.Annotations
	g.Expect(signed).To(HaveKey(pin.SignatureAnnotation))

	// The binding deleted: pinning off.
	objs, err := installPinning()
	g.Expect(err).NotTo(HaveOccurred())
	binding := objs[1].DeepCopy()
	g.Expect(binding.GetKind()).To(Equal("MutatingAdmissionPolicyBinding"))
	g.Expect(k8s.Delete(ctx, binding)).To(Succeed())
	t.Cleanup(func() {
		restored := objs[1].DeepCopy()
		if err := k8s.Create(ctx, restored); err != nil {
			t.Errorf("restore the binding: %v", err)
		}
	})
	time.Sleep(11 * time.Second) // watcher trusts its last look at the policy for 10 s
	setData(t, s.extra, "level", "e2")
	g.Eventually(func() int { return s.revision(t) }, wait).Should(Equal(3))
	g.Eventually(func() string { return eventNote(t, s.ns, "Deployment", controller.ReasonPinningOff) }, wait).Should(ContainSubstring(pinningPolicy))
	g.Expect(s.template(t)).To(BeEmpty(), "the pins removed: new pods read the live objects")
	g.Expect(metric(s.w.Metrics(t), "watcher_pinning_available")).To(BeZero())
	waitRunning(t, s.dep)
	g.Eventually(func() []string { return s.podsRead(t) }, wait).Should(HaveEach("app,db"))

	// Pods of a pinned revision created while the policy does not run come
	// up unpinned: watcher says so. (A revision of pins watcher signed: it
	// acts on no pins a tenant wrote.)
	hand := fixture.Deployment(s.ns, "hand", fixture.EnvFrom("", "db"))
	hand.Spec.Template.Annotations = map[string]string{
		pin.PinsAnnotation: signed[pin.PinsAnnotation], pin.SignatureAnnotation: signed[pin.SignatureAnnotation]}
	hand.Spec.Template.Labels[pin.PinnedLabel] = "true"
	create(t, hand)
	g.Eventually(func() []string { return eventNotesOn(t, s.ns, "hand", snapshot.ReasonPodsUnpinned) }, wait).Should(ContainElement(ContainSubstring("came up unpinned")))
	g.Expect(metric(s.w.Metrics(t), "watcher_unpinned_pods_total")).To(BeNumerically(">=", 1))
}

// revisionOf returns the revision of Deployment d.
func revisionOf(t *testing.T, d *appsv1.Deployment) int {
	s := &pinnedScene{dep: d}
	return s.revision(t)
}

// templatePins returns the pins of Deployment d's template.
func templatePins(t *testing.T, d *appsv1.Deployment) pin.Pins {
	s := &pinnedScene{dep: d}
	return s.template(t)
}

// podsOf returns the pods of Deployment d.
func podsOf(t *testing.T, d *appsv1.Deployment) []corev1.Pod {
	var list corev1.PodList
	if err := k8s.List(ctx, &list, client.InNamespace(d.Namespace), client.MatchingLabels{"app": d.Name}); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// TestPinnedByPolicy (issue 31): a ReloadPolicy with pin: true pins its
// target, which carries no annotation, and says so in its condition
// Pinned.
func TestPinnedByPolicy(t *testing.T) {
	g := NewWithT(t)
	installPolicyCRD(t)
	if _, err := installPinning(); err != nil {
		t.Fatal(err)
	}
	ns := namespace(t)
	cm := fixture.ConfigMap(ns, "app", map[string]string{"mode": "v1"})
	create(t, cm)
	dep := fixture.Deployment(ns, "web", fixture.EnvFrom("app", ""))
	create(t, dep)
	w := startWatcherEnv(t, "watcher", ns, []string{"PINNING=true", "PINNING_GRACE=2s"})
	w.WaitReady(t)
	create(t, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "watcher.dev/v1alpha1", "kind": "ReloadPolicy",
		"metadata": map[string]any{"namespace": ns, "name": "pinned"},
		"spec": map[string]any{
			"sources": []any{map[string]any{"kind": "ConfigMap", "name": "app"}},
			"targets": []any{map[string]any{"kind": "Deployment", "name": "web"}},
			"pin":     true,
		},
	}})
	waitAdopted(t, dep)
	setData(t, cm, "mode", "v2")
	g.Eventually(func() int { return revisionOf(t, dep) }, wait).Should(Equal(2))
	g.Expect(templatePins(t, dep)).To(HaveKey(appSource))
	g.Eventually(func() string {
		p := &unstructured.Unstructured{}
		p.SetAPIVersion("watcher.dev/v1alpha1")
		p.SetKind("ReloadPolicy")
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pinned"}, p)).To(Succeed())
		conds, _, _ := unstructured.NestedSlice(p.Object, "status", "conditions")
		for _, c := range conds {
			if m := c.(map[string]any); m["type"] == "Pinned" {
				return m["status"].(string) + " " + m["reason"].(string)
			}
		}
		return ""
	}, wait).Should(Equal("True Pinned"))
	// explain reads the policy as the controller does.
	code, out := runWatcher(t, nil, "explain", "deployment/web", "-n", ns, "--watcher-namespace", ns, "-o", "json")
	g.Expect(code).To(BeZero(), out)
	var rep explain.WorkloadReport
	g.Expect(json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &rep)).To(Succeed(), out)
	g.Expect(rep.Uses).To(HaveLen(1))
	g.Expect(rep.Uses[0].Pin).To(Equal(&explain.Pin{State: explain.PinPinned, Snapshot: templatePins(t, dep)[appSource]}))
}

// TestPinnedBudget (issue 31): with a namespace budget of 1 MiB
// (PINNING_BUDGET=1), a second 600 KiB snapshot would go over it: that
// restart leaves the ConfigMap live, with a Warning, and still rolls.
func TestPinnedBudget(t *testing.T) {
	if _, err := installPinning(); err != nil {
		t.Fatal(err)
	}
	g := NewWithT(t)
	ns := namespace(t)
	big := func(c string) map[string]string { return map[string]string{"blob": strings.Repeat(c, 600<<10)} }
	cm := fixture.ConfigMap(ns, "app", big("a"))
	create(t, cm)
	dep := fixture.Deployment(ns, "web", fixture.EnvFrom("app", ""))
	dep.Annotations = map[string]string{pin.Annotation: "true"}
	create(t, dep)
	w := startWatcherEnv(t, "watcher", ns, []string{"PINNING=true", "PINNING_GRACE=2s", "PINNING_BUDGET=1"})
	w.WaitReady(t)
	waitAdopted(t, dep)

	setData(t, cm, "blob", strings.Repeat("b", 600<<10))
	g.Eventually(func() int { return revisionOf(t, dep) }, wait).Should(Equal(2))
	g.Expect(templatePins(t, dep)).To(HaveKey(appSource), "600 KiB fit in 1 MiB")
	setData(t, cm, "blob", strings.Repeat("c", 600<<10))
	g.Eventually(func() int { return revisionOf(t, dep) }, wait).Should(Equal(3), "the restart is made")
	g.Eventually(func() string { return eventNote(t, ns, "Deployment", controller.ReasonPinBudgetSpent) }, wait).Should(ContainSubstring("configmap app"))
	g.Expect(templatePins(t, dep)).To(BeEmpty(), "left live: its pods read the ConfigMap")
	g.Expect(metric(w.Metrics(t), `watcher_pinned_restarts_total{outcome="partial"}`)).To(Equal(1.0))
}
