package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/controller"
	"github.com/watcher-dev/watcher/internal/explain"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/test/fixture"
)

// pinningPolicy is the chart's MutatingAdmissionPolicy (and binding) for
// the release "watcher": the name watcher's --pinning-policy defaults to.
const pinningPolicy = "watcher-pins"

// installPinning applies, once, the MutatingAdmissionPolicy and its
// binding as the chart renders them with pinning.enabled (the real helm
// CLI, hack/helm.sh): cluster-wide objects, which act only on pods
// carrying watcher.dev/pins. It returns them, for a test to delete and
// restore, once the API server enforces them (pinningInForce), at every
// call: a test before may have restored them just now.
func installPinning() ([]*unstructured.Unstructured, error) {
	objs, err := createPinning()
	if err != nil {
		return nil, err
	}
	return objs, pinningInForce()
}

// pinningInForce waits until the API server enforces the pinning policy
// and its binding. It loads policies from its own watch of them and
// recompiles them at most every second: for a second or more after they
// are written (1.6 s measured under load), a pod carrying pins is
// admitted as it is, unpinned and unmarked (failurePolicy applies to
// errors, not to a policy not loaded yet). A probe pod that reads a
// ConfigMap and pins it, created in dry run (admission runs, nothing is
// stored), comes back rewritten and marked once the policy is in force.
func pinningInForce() error {
	const snapshot = "probe-pin-00000000000000000000"
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "pinning-probe",
			Annotations: map[string]string{pin.PinsAnnotation: "configmap/probe=" + snapshot}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "probe",
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "probe"}}}}}}},
	}
	var last error
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		p := probe.DeepCopy()
		if last = k8s.Create(ctx, p, client.DryRunAll); last != nil {
			continue
		}
		if p.Annotations[pin.Admitted] == "true" && p.Spec.Containers[0].EnvFrom[0].ConfigMapRef.Name == snapshot {
			return nil
		}
		last = errors.New("the probe pod was admitted unpinned")
	}
	return fmt.Errorf("the pinning policy is not in force after %s: %w", wait, last)
}

// createPinning creates, once, the objects of installPinning.
var createPinning = sync.OnceValues(func() ([]*unstructured.Unstructured, error) {
	out, err := exec.Command("../../hack/helm.sh").Output()
	if err != nil {
		return nil, err
	}
	render := exec.Command(strings.TrimSpace(string(out)), "template", "watcher", "../../deploy/helm/watcher",
		"--namespace", "watcher", "--set", "pinning.enabled=true", "--show-only", "templates/pinning.yaml",
		"--api-versions", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy") // as the API server of the e2e cluster serves it
	var stderr bytes.Buffer
	render.Stderr = &stderr
	text, err := render.Output()
	if err != nil {
		return nil, errors.New(stderr.String())
	}
	var objs []*unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(text), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, err
		}
		if !strings.HasPrefix(u.GetKind(), "MutatingAdmissionPolicy") {
			continue
		}
		if err := k8s.Create(ctx, u.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
		objs = append(objs, u)
	}
	if len(objs) != 2 {
		return nil, errors.New("the chart renders no MutatingAdmissionPolicy and binding with pinning.enabled")
	}
	return objs, nil
})

// pinnedScene is a Deployment pinning its config: ConfigMap app read
// through envFrom and Secret db through a volume, two replicas, a history
// of two, and a watcher with --pinning (PINNING=true, as the chart sets it
// with pinning.enabled), every other setting at its default.
type pinnedScene struct {
	ns  string
	cm  *corev1.ConfigMap
	sec *corev1.Secret
	// extra is read through env valueFrom.
	extra *corev1.ConfigMap
	dep   *appsv1.Deployment
	w     *proc
}

func newPinnedScene(t *testing.T) *pinnedScene {
	t.Helper()
	if _, err := installPinning(); err != nil {
		t.Fatal(err)
	}
	ns := namespace(t)
	s := &pinnedScene{ns: ns,
		cm:  fixture.ConfigMap(ns, "app", map[string]string{"mode": "v1"}),
		sec: fixture.Secret(ns, "db", map[string]string{"password": "p1"})}
	s.extra = fixture.ConfigMap(ns, "extra", map[string]string{"level": "e"})
	// As a GitOps tool leaves it: a snapshot must carry none of it.
	s.cm.Labels = map[string]string{"app.kubernetes.io/instance": "web"}
	s.cm.Annotations = map[string]string{"argocd.argoproj.io/tracking-id": "web:/ConfigMap:ns/app"}
	create(t, s.cm)
	create(t, s.sec)
	create(t, s.extra)
	spec := fixture.EnvFrom("app", "")
	spec.Containers[0].Env = []corev1.EnvVar{{Name: "LEVEL", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "extra"}, Key: "level"}}}}
	spec.Volumes = []corev1.Volume{{Name: "db", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db"}}}}
	spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "db", MountPath: "/db"}}
	s.dep = fixture.Deployment(ns, "web", spec)
	s.dep.Annotations = map[string]string{pin.Annotation: "true"}
	s.dep.Spec.Replicas = ptr.To[int32](2)
	s.dep.Spec.RevisionHistoryLimit = ptr.To[int32](2)
	create(t, s.dep)
	s.w = startWatcherEnv(t, "watcher", ns, []string{"PINNING=true", "PINNING_GRACE=2s"}, "--coalesce=1s")
	s.w.WaitReady(t)
	waitAdopted(t, s.dep)
	waitRunning(t, s.dep)
	return s
}

// pods returns the pods of the scene's Deployment, not being deleted.
func (s *pinnedScene) pods(t *testing.T) []corev1.Pod {
	t.Helper()
	var list corev1.PodList
	if err := k8s.List(ctx, &list, client.InNamespace(s.ns), client.MatchingLabels{"app": "web"}); err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
}

// reads returns what a pod reads, as a kubelet would: the ConfigMap of
// its envFrom and the Secret of its volume.
func reads(p corev1.Pod) (configMap, secret string) {
	for _, e := range p.Spec.Containers[0].EnvFrom {
		if e.ConfigMapRef != nil {
			configMap = e.ConfigMapRef.Name
		}
	}
	for _, v := range p.Spec.Volumes {
		if v.Secret != nil {
			secret = v.Secret.SecretName
		}
	}
	return configMap, secret
}

// podsRead returns, sorted, "configmap,secret" of each pod.
func (s *pinnedScene) podsRead(t *testing.T) []string {
	var out []string
	for _, p := range s.pods(t) {
		cm, sec := reads(p)
		out = append(out, cm+","+sec)
	}
	slices.Sort(out)
	return out
}

// revision returns the Deployment's revision (deployment.kubernetes.io/revision):
// one per rollout, the undo's included.
func (s *pinnedScene) revision(t *testing.T) int {
	d := get(t, &appsv1.Deployment{ObjectMeta: s.dep.ObjectMeta})
	n, _ := strconv.Atoi(d.Annotations["deployment.kubernetes.io/revision"])
	return n
}

// template returns the pins of the Deployment's template now.
func (s *pinnedScene) template(t *testing.T) pin.Pins {
	d := get(t, &appsv1.Deployment{ObjectMeta: s.dep.ObjectMeta})
	return pin.Parse(d.Spec.Template.Annotations[pin.PinsAnnotation])
}

// snapshots returns the scene's snapshots by name.
func (s *pinnedScene) snapshots(t *testing.T) map[string]client.Object {
	t.Helper()
	out := map[string]client.Object{}
	var cms corev1.ConfigMapList
	var secs corev1.SecretList
	sel := client.MatchingLabels{pin.SnapshotLabel: "true"}
	if err := k8s.List(ctx, &cms, client.InNamespace(s.ns), sel); err != nil {
		t.Fatal(err)
	}
	if err := k8s.List(ctx, &secs, client.InNamespace(s.ns), sel); err != nil {
		t.Fatal(err)
	}
	for i := range cms.Items {
		out[cms.Items[i].Name] = &cms.Items[i]
	}
	for i := range secs.Items {
		out[secs.Items[i].Name] = &secs.Items[i]
	}
	return out
}

var (
	appSource = pin.Source{Kind: pin.ConfigMap, Name: "app"}
	dbSource  = pin.Source{Kind: pin.Secret, Name: "db"}
)

// TestPinnedRevisions (issue 31): a pinned Deployment reading a ConfigMap
// (envFrom) and a Secret (volume) edited together rolls once; its new
// pods read immutable snapshots holding the new data, owned in the end
// by the ReplicaSet only; a second edit pins a second revision; kubectl
// rollout undo brings back the first revision's snapshots with no rollout
// by watcher, which says RolledBack and leaves the live ConfigMap alone,
// and does not roll forward to what the rollback left; a new edit then
// rolls once; a Git revert to the first content rolls once and reuses its
// snapshot.
func TestPinnedRevisions(t *testing.T) {
	s := newPinnedScene(t)
	g := NewWithT(t)
	g.Expect(s.revision(t)).To(Equal(1))

	// Both edited together: one rollout, its pods pinned.
	setData(t, s.cm, "mode", "v2")
	setData(t, s.sec, "password", "p2")
	g.Eventually(func() int { return s.revision(t) }, wait).Should(Equal(2))
	g.Eventually(func() int { return len(s.template(t)) }, wait).Should(Equal(3))
	first := s.template(t)
	waitRunning(t, s.dep)
	g.Consistently(func() int { return s.revision(t) }, 3*time.Second, 200*time.Millisecond).Should(Equal(2), "one rollout for both")
	g.Eventually(func() []string { return s.podsRead(t) }, wait).Should(Equal([]string{first[appSource] + "," + first[dbSource], first[appSource] + "," + first[dbSource]}))
	snaps := s.snapshots(t)
	g.Expect(snaps).To(HaveLen(3))
	cmSnap, secSnap := snaps[first[appSource]].(*corev1.ConfigMap), snaps[first[dbSource]].(*corev1.Secret)
	g.Expect(cmSnap.Data).To(Equal(map[string]string{"mode": "v2"}))
	g.Expect(string(secSnap.Data["password"])).To(Equal("p2"))
	g.Expect(*cmSnap.Immutable && *secSnap.Immutable).To(BeTrue())
	g.Expect(cmSnap.Labels).To(Equal(map[string]string{pin.SnapshotLabel: "true"}))
	g.Expect(cmSnap.Annotations).To(And(HaveLen(4), HaveKeyWithValue(pin.SnapshotOf, "configmap/app"), HaveKeyWithValue(pin.ChangedBy, "e2e.test"),
		HaveKeyWithValue(pin.Bytes, "6"), HaveKeyWithValue(pin.BytesSignature, Not(BeEmpty()))), "none of the source's; who wrote it, and its size, signed")
	g.Eventually(func() []string { return ownerKinds(t, s) }, wait).Should(HaveEach("ReplicaSet"), "handed to the ReplicaSet")

	// A second revision.
	setData(t, s.cm, "mode", "v3")
	g.Eventually(func() int { return s.revision(t) }, wait).Should(Equal(3))
	waitRunning(t, s.dep)
	second := s.template(t)
	g.Expect(second[appSource]).NotTo(Equal(first[appSource]))
	g.Expect(second[dbSource]).To(Equal(first[dbSource]), "the same content, the same snapshot")
	g.Eventually(func() []string { return s.podsRead(t) }, wait).Should(HaveEach(second[appSource] + "," + second[dbSource]))

	// kubectl rollout undo: the first revision's config comes back.
	undo := exec.Command(kube.BinDir+"/kubectl", "--kubeconfig", kube.Kubeconfig, "-n", s.ns, "rollout", "undo", "deployment/web")
	if out, err := undo.CombinedOutput(); err != nil {
		t.Fatalf("kubectl rollout undo: %v: %s", err, out)
	}
	g.Eventually(func() string { return eventNote(t, s.ns, "Deployment", controller.ReasonRolledBack) }, wait).
		Should(ContainSubstring("configmap app back to " + first[appSource] + " from " + second[appSource]))
	g.Eventually(func() []string { return s.podsRead(t) }, wait).Should(HaveEach(first[appSource] + "," + first[dbSource]))
	g.Consistently(func() int { return s.revision(t) }, 5*time.Second, 200*time.Millisecond).Should(Equal(4), "the undo's rollout only, none by watcher")
	g.Expect(s.template(t)).To(Equal(first))
	g.Expect(get(t, &corev1.ConfigMap{ObjectMeta: s.cm.ObjectMeta}).Data).To(Equal(map[string]string{"mode": "v3"}), "the live ConfigMap untouched")
	stale := `watcher_stale_workloads{namespace="` + s.ns + `"}`
	g.Eventually(func() float64 { return metric(s.w.Metrics(t), stale) }, wait).Should(Equal(1.0), "its pods run older config than the live one")
	// A new content rolls forward, once.
	setData(t, s.cm, "mode", "v4")
	g.Eventually(func() int { return s.revision(t) }, wait).Should(Equal(5))
	waitRunning(t, s.dep)
	g.Consistently(func() int { return s.revision(t) }, 3*time.Second, 200*time.Millisecond).Should(Equal(5))
	g.Expect(get(t, &appsv1.Deployment{ObjectMeta: s.dep.ObjectMeta}).Annotations).NotTo(HaveKey(pin.RolledBackFrom))
	g.Eventually(func() float64 { return metric(s.w.Metrics(t), stale) }, wait).Should(BeZero())

	// A Git revert: app's content of the first revision again rolls once
	// and reuses its snapshot.
	setData(t, s.cm, "mode", "v2")
	g.Eventually(func() int { return s.revision(t) }, wait).Should(Equal(6))
	waitRunning(t, s.dep)
	g.Expect(s.template(t)[appSource]).To(Equal(first[appSource]), "the same content, the same snapshot")
	g.Expect(metric(s.w.Metrics(t), `watcher_snapshots_total{how="reused",kind="configmap"}`)).To(BeNumerically(">=", 1))

}

// TestPinnedHistory (issue 31): with revisionHistoryLimit 2, five
// changes (spread over the three sources: one changing more often would
// be flapping) leave exactly the snapshots that the ReplicaSets kept (the
// current one and two old ones) pin, each owned by ReplicaSets only;
// deleting the Deployment removes them all (the garbage collector;
// watcher deletes nothing).
func TestPinnedHistory(t *testing.T) {
	s := newPinnedScene(t)
	g := NewWithT(t)
	for i := range 5 {
		switch i % 3 {
		case 0:
			setData(t, s.extra, "level", "e"+strconv.Itoa(i))
		case 1:
			setData(t, s.sec, "password", "h"+strconv.Itoa(i))
		default:
			setData(t, s.cm, "mode", "m"+strconv.Itoa(i))
		}
		g.Eventually(func() int { return s.revision(t) }, wait).Should(Equal(2 + i))
		waitRunning(t, s.dep)
	}
	g.Expect(s.template(t)).To(HaveKey(pin.Source{Kind: pin.ConfigMap, Name: "extra"}), "env valueFrom is pinned too")
	g.Eventually(func() []string { return pinnedByReplicaSets(t, s) }, 2*wait).Should(Equal(sortedKeys(s.snapshots(t))))
	g.Eventually(func() []string { return ownerKinds(t, s) }, 2*wait).Should(HaveEach("ReplicaSet"), "the workload lets go after the grace (PINNING_GRACE)")
	g.Expect(len(s.snapshots(t))).To(BeNumerically("<", 3*3), "fewer than the revisions made times the sources")

	// Deleting the Deployment removes its snapshots with its ReplicaSets.
	if err := k8s.Delete(ctx, s.dep, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	g.Eventually(func() map[string]client.Object { return s.snapshots(t) }, 2*wait).Should(BeEmpty())
}

// ownerKinds returns the kinds of the owners of every snapshot of s.
func ownerKinds(t *testing.T, s *pinnedScene) []string {
	var out []string
	for _, o := range s.snapshots(t) {
		for _, r := range o.GetOwnerReferences() {
			out = append(out, r.Kind)
		}
	}
	return out
}

// pinnedByReplicaSets returns, sorted, the snapshots the templates of the
// Deployment's ReplicaSets pin.
func pinnedByReplicaSets(t *testing.T, s *pinnedScene) []string {
	var list appsv1.ReplicaSetList
	if err := k8s.List(ctx, &list, client.InNamespace(s.ns), client.MatchingLabels{"app": "web"}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, rs := range list.Items {
		for _, snap := range pin.Parse(rs.Spec.Template.Annotations[pin.PinsAnnotation]) {
			seen[snap] = true
		}
	}
	return sortedKeys(seen)
}

// sortedKeys returns the keys of m, sorted.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestPinnedStatefulSet (issue 31): a pinned StatefulSet's restart pins
// its pods like a Deployment's, and its snapshot is handed to the
// ControllerRevision of the new template.
func TestPinnedStatefulSet(t *testing.T) {
	if _, err := installPinning(); err != nil {
		t.Fatal(err)
	}
	g := NewWithT(t)
	ns := namespace(t)
	cm := fixture.ConfigMap(ns, "app", map[string]string{"mode": "v1"})
	create(t, cm)
	sts := fixture.StatefulSet(ns, "db", fixture.EnvFrom("app", ""))
	sts.Annotations = map[string]string{pin.Annotation: "true"}
	create(t, sts)
	w := startWatcherEnv(t, "watcher", ns, []string{"PINNING=true", "PINNING_GRACE=2s"})
	w.WaitReady(t)
	waitAdopted(t, sts)
	setData(t, cm, "mode", "v2")
	var snap string
	g.Eventually(func() string {
		cur := get(t, &appsv1.StatefulSet{ObjectMeta: sts.ObjectMeta})
		snap = pin.Parse(cur.Spec.Template.Annotations[pin.PinsAnnotation])[appSource]
		return snap
	}, wait).ShouldNot(BeEmpty())
	g.Eventually(func() []string {
		var list corev1.PodList
		g.Expect(k8s.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{"app": "db"})).To(Succeed())
		var reads []string
		for _, p := range list.Items {
			reads = append(reads, p.Spec.Containers[0].EnvFrom[0].ConfigMapRef.Name)
		}
		return reads
	}, wait).Should(Equal([]string{snap}), "the new pod reads the snapshot")
	g.Eventually(func() []string {
		o := get(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: snap}})
		var kinds []string
		for _, r := range o.OwnerReferences {
			kinds = append(kinds, r.Kind)
		}
		return kinds
	}, wait).Should(Equal([]string{"ControllerRevision"}))
}

// TestPinnedRelease (issue 31): after kubectl rollout undo, a person
// releases the hold on the content the rollback left by removing
// watcher.dev/rolled-back-from: watcher rolls forward to it, once, onto
// its existing snapshot.
func TestPinnedRelease(t *testing.T) {
	s := newPinnedScene(t)
	g := NewWithT(t)
	setData(t, s.cm, "mode", "v2")
	g.Eventually(func() int { return s.revision(t) }, wait).Should(Equal(2))
	waitRunning(t, s.dep)
	setData(t, s.cm, "mode", "v3")
	g.Eventually(func() int { return s.revision(t) }, wait).Should(Equal(3))
	waitRunning(t, s.dep)
	latest := s.template(t)
	undo := exec.Command(kube.BinDir+"/kubectl", "--kubeconfig", kube.Kubeconfig, "-n", s.ns, "rollout", "undo", "deployment/web")
	if out, err := undo.CombinedOutput(); err != nil {
		t.Fatalf("kubectl rollout undo: %v: %s", err, out)
	}
	g.Eventually(func() map[string]string { return get(t, &appsv1.Deployment{ObjectMeta: s.dep.ObjectMeta}).Annotations }, wait).
		Should(HaveKeyWithValue(pin.RolledBackFrom, ContainSubstring(latest[appSource])))
	g.Eventually(func() int { return s.revision(t) }, wait).Should(Equal(4), "the undo's rollout")
	g.Consistently(func() int { return s.revision(t) }, 3*time.Second, 200*time.Millisecond).Should(Equal(4))
	// explain says what the controller does: no restart.
	code, out := runWatcher(t, nil, "explain", "deployment/web", "-n", s.ns, "--watcher-namespace", s.ns, "-o", "json")
	g.Expect(code).To(BeZero(), out)
	var rep explain.WorkloadReport
	g.Expect(json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &rep)).To(Succeed(), out)
	g.Expect(rep.Pending).To(BeFalse(), out)
	g.Expect(rep.Status+" "+strings.Join(rep.Notes, " ")).To(ContainSubstring("rolled back"), out)

	release := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/annotations/watcher.dev~1rolled-back-from"}]`))
	g.Expect(k8s.Patch(ctx, &appsv1.Deployment{ObjectMeta: s.dep.ObjectMeta}, release)).To(Succeed())
	g.Eventually(func() int { return s.revision(t) }, wait).Should(Equal(5), "released: rolls forward")
	g.Eventually(func() pin.Pins { return s.template(t) }, wait).Should(Equal(latest), "onto the snapshots it left")
	waitRunning(t, s.dep)
	g.Consistently(func() int { return s.revision(t) }, 3*time.Second, 200*time.Millisecond).Should(Equal(5))
}

// TestPinnedDaemonSet (issue 31): a pinned DaemonSet's restart pins its
// pod, and its snapshot is handed to the ControllerRevision of the new
// template.
func TestPinnedDaemonSet(t *testing.T) {
	if _, err := installPinning(); err != nil {
		t.Fatal(err)
	}
	g := NewWithT(t)
	ns := namespace(t)
	sec := fixture.Secret(ns, "db", map[string]string{"password": "p1"})
	create(t, sec)
	ds := fixture.DaemonSet(ns, "agent", fixture.EnvFrom("", "db"))
	ds.Annotations = map[string]string{pin.Annotation: "true"}
	create(t, ds)
	w := startWatcherEnv(t, "watcher", ns, []string{"PINNING=true", "PINNING_GRACE=2s"})
	w.WaitReady(t)
	waitAdopted(t, ds)
	setData(t, sec, "password", "p2")
	var snap string
	g.Eventually(func() string {
		cur := get(t, &appsv1.DaemonSet{ObjectMeta: ds.ObjectMeta})
		snap = pin.Parse(cur.Spec.Template.Annotations[pin.PinsAnnotation])[dbSource]
		return snap
	}, wait).ShouldNot(BeEmpty())
	g.Eventually(func() []string {
		var list corev1.PodList
		g.Expect(k8s.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{"app": "agent"})).To(Succeed())
		var reads []string
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil {
				reads = append(reads, p.Spec.Containers[0].EnvFrom[0].SecretRef.Name)
			}
		}
		return reads
	}, wait).Should(Equal([]string{snap}), "the new pod reads the snapshot")
	g.Eventually(func() []string {
		o := get(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: snap}})
		var kinds []string
		for _, r := range o.OwnerReferences {
			kinds = append(kinds, r.Kind)
		}
		return kinds
	}, wait).Should(Equal([]string{"ControllerRevision"}))
}
