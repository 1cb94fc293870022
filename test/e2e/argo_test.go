package e2e

import (
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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/controller"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/workload"
	"github.com/watcher-dev/watcher/test/fixture"
)

// TestArgoRollouts: Argo Rollouts' own controller (built from its Go module
// by hack/argo-rollouts.sh, with its own CRDs) rolls Rollouts on the kwok
// cluster. A change of the ConfigMap a Rollout's template uses gives the
// Rollout exactly one new ReplicaSet, whose pods run the new template and
// replace the old ones. A Rollout whose template lives in a Deployment
// (spec.workloadRef) is rolled by Argo when watcher restarts that
// Deployment, and the Rollout itself is never written.
func TestArgoRollouts(t *testing.T) {
	dir := argoRollouts(t)
	installCRDs(t, filepath.Join(dir, "crds"))
	ns := namespace(t)
	startArgo(t, dir, ns)
	cm := fixture.ConfigMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	own := argoRollout(t, ns, "own", map[string]any{"template": template(t, "own")})
	base := fixture.Deployment(ns, "base", fixture.EnvFrom("cfg", ""))
	base.Spec.Replicas = ptr.To[int32](0) // Argo runs the pods, from its template
	byRef := argoRollout(t, ns, "by-ref", map[string]any{
		"workloadRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "base"},
	})
	create(t, own, base, byRef)
	for _, r := range []string{"own", "by-ref"} {
		waitRolledOut(t, ns, r, 1)
	}
	startWatcher(t, "watcher", ns)
	waitAdopted(t, own)
	waitAdopted(t, base)

	setData(t, cm, "a", "2")
	for _, r := range []string{"own", "by-ref"} {
		waitRolledOut(t, ns, r, 2)
	}
	waitRestarted(t, ns, "own", "ConfigMap cfg changed (keys: a;")
	waitRestarted(t, ns, "base", "ConfigMap cfg changed (keys: a;")
	time.Sleep(2 * time.Second)
	for _, r := range []string{"own", "by-ref"} {
		NewWithT(t).Expect(rolloutReplicaSets(t, ns, r)).To(HaveLen(2), "Rollout %s rolled once", r)
	}
	NewWithT(t).Expect(get(t, byRef).GetAnnotations()).NotTo(HaveKey(plan.RecordAnnotation), "the workloadRef Rollout is not written")
}

// argoRollouts builds Argo's controller if needed and returns its folder.
func argoRollouts(t *testing.T) string { return hack(t, "argo-rollouts.sh") }

// installCRDs creates every CRD of dir (those there already are left alone)
// and waits until Rollouts are served.
func installCRDs(t *testing.T, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*-crd.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in %s: %v", dir, err)
	}
	for _, f := range files {
		createCRD(t, f)
	}
	installCRD(t, files[0], workload.Rollout.GVK.GroupVersion().WithKind("RolloutList"), "default")
}

// startArgo runs Argo's controller for namespace ns until the test ends.
func startArgo(t *testing.T, dir, ns string) {
	t.Helper()
	port := func() string { a := fixture.FreeAddr(t); return a[strings.LastIndex(a, ":")+1:] }
	runUntilCleanup(t, "rollouts-controller", exec.Command(filepath.Join(dir, "rollouts-controller"), "--kubeconfig="+kube.Kubeconfig,
		"--namespaced", "--namespace="+ns, "--leader-elect=false", "--metricsport="+port(), "--healthzPort="+port(),
		"--rollout-resync=10"))
}

// argoRollout returns a Rollout of two replicas with spec, a canary without
// steps (a new revision is promoted at once).
func argoRollout(t *testing.T, ns, name string, spec map[string]any) *unstructured.Unstructured {
	t.Helper()
	spec["replicas"] = int64(2)
	spec["selector"] = map[string]any{"matchLabels": map[string]any{"app": name}}
	if _, ok := spec["workloadRef"]; ok {
		spec["selector"] = map[string]any{"matchLabels": map[string]any{"app": "base"}}
	}
	spec["strategy"] = map[string]any{"canary": map[string]any{}}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(workload.Rollout.GVK)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// template is the pod template of a Rollout that reads ConfigMap cfg.
func template(t *testing.T, name string) map[string]any {
	t.Helper()
	tmpl := fixture.Deployment("", name, fixture.EnvFrom("cfg", "")).Spec.Template
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&tmpl)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// rolloutReplicaSets returns the ReplicaSets the Rollout name owns.
func rolloutReplicaSets(t *testing.T, ns, name string) []appsv1.ReplicaSet {
	t.Helper()
	var all appsv1.ReplicaSetList
	if err := k8s.List(ctx, &all, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []appsv1.ReplicaSet
	for _, rs := range all.Items {
		for _, o := range rs.OwnerReferences {
			if o.Kind == "Rollout" && o.Name == name {
				out = append(out, rs)
			}
		}
	}
	return out
}

// waitRolledOut waits until the Rollout name owns n ReplicaSets and its pods
// (two, Ready) all belong to the newest, which Argo reports Healthy.
func waitRolledOut(t *testing.T, ns, name string, n int) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		ro := workload.Rollout.New().(*unstructured.Unstructured)
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ro)).To(Succeed())
		phase, _, _ := unstructured.NestedString(ro.Object, "status", "phase")
		g.Expect(phase).To(Equal("Healthy"), "Rollout %s phase", name)
		hash, _, _ := unstructured.NestedString(ro.Object, "status", "currentPodHash")
		g.Expect(rolloutReplicaSets(t, ns, name)).To(HaveLen(n))
		var pods corev1.PodList
		g.Expect(k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"rollouts-pod-template-hash": hash})).To(Succeed())
		ready := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && podReady(&p) {
				ready++
			}
		}
		g.Expect(ready).To(Equal(2), "ready pods of Rollout %s's revision %s", name, hash)
		var others corev1.PodList
		g.Expect(k8s.List(ctx, &others, client.InNamespace(ns))).To(Succeed())
		for _, p := range others.Items {
			if p.Labels["rollouts-pod-template-hash"] != hash && ownedByRollout(p, name) && p.DeletionTimestamp == nil {
				g.Expect(p.Status.Phase).NotTo(Equal(corev1.PodRunning), "old pod %s still running", p.Name)
			}
		}
	}, 2*wait, 250*time.Millisecond).Should(Succeed(), "Rollout %s rolled out to revision %d", name, n)
}

// ownedByRollout tells whether pod p belongs to a ReplicaSet of the Rollout
// name (ReplicaSets are named after their Rollout).
func ownedByRollout(p corev1.Pod, name string) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "ReplicaSet" && strings.HasPrefix(o.Name, name+"-") {
			return true
		}
	}
	return false
}

// TestPinnedArgoRollout (issue 31): Argo Rollouts' own controller rolls a
// pinned Rollout: each restart by watcher is a ReplicaSet whose pods read
// its snapshot, handed to that ReplicaSet; Argo's undo (the template of an
// older ReplicaSet copied back, as `kubectl argo rollouts undo` does)
// brings that revision's snapshot back, and watcher says RolledBack
// without rolling.
func TestPinnedArgoRollout(t *testing.T) {
	dir := argoRollouts(t)
	installCRDs(t, filepath.Join(dir, "crds"))
	if _, err := installPinning(); err != nil {
		t.Fatal(err)
	}
	g := NewWithT(t)
	ns := namespace(t)
	startArgo(t, dir, ns)
	cm := fixture.ConfigMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	ro := argoRollout(t, ns, "own", map[string]any{"template": template(t, "own")})
	ro.SetAnnotations(map[string]string{pin.Annotation: "true"})
	create(t, ro)
	waitRolledOut(t, ns, "own", 1)
	startWatcherEnv(t, "watcher", ns, []string{"PINNING=true", "PINNING_GRACE=2s"}).WaitReady(t)
	waitAdopted(t, ro)

	pinsOf := func(rs appsv1.ReplicaSet) string {
		return pin.Parse(rs.Spec.Template.Annotations[pin.PinsAnnotation])[pin.Source{Kind: pin.ConfigMap, Name: "cfg"}]
	}
	byRevision := func(n string) appsv1.ReplicaSet {
		for _, rs := range rolloutReplicaSets(t, ns, "own") {
			if rs.Annotations["rollout.argoproj.io/revision"] == n {
				return rs
			}
		}
		return appsv1.ReplicaSet{}
	}
	setData(t, cm, "a", "2")
	waitRolledOut(t, ns, "own", 2)
	second := byRevision("2")
	g.Expect(pinsOf(second)).To(HavePrefix("cfg-pin-"))
	setData(t, cm, "a", "3")
	waitRolledOut(t, ns, "own", 3)
	third := byRevision("3")
	g.Expect(pinsOf(third)).To(And(HavePrefix("cfg-pin-"), Not(Equal(pinsOf(second)))))
	g.Eventually(func() []string {
		snap := get(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pinsOf(third)}})
		var owners []string
		for _, o := range snap.OwnerReferences {
			owners = append(owners, o.Kind+"/"+o.Name)
		}
		return owners
	}, wait).Should(Equal([]string{"ReplicaSet/" + third.Name}))
	var pods corev1.PodList
	g.Expect(k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"rollouts-pod-template-hash": third.Labels["rollouts-pod-template-hash"]})).To(Succeed())
	g.Expect(pods.Items).NotTo(BeEmpty())
	for _, p := range pods.Items {
		g.Expect(p.Spec.Containers[0].EnvFrom[0].ConfigMapRef.Name).To(Equal(pinsOf(third)))
	}

	// Argo's undo: revision 2's template back on the Rollout.
	tmpl := second.Spec.Template.DeepCopy()
	delete(tmpl.Labels, "rollouts-pod-template-hash")
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tmpl)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error { // Argo writes the Rollout too
		cur := get(t, ro)
		if err := unstructured.SetNestedField(cur.Object, m, "spec", "template"); err != nil {
			return err
		}
		return k8s.Update(ctx, cur)
	})).To(Succeed())
	g.Eventually(func() string { return eventNote(t, ns, "Rollout", controller.ReasonRolledBack) }, 2*wait).
		Should(ContainSubstring("configmap cfg back to " + pinsOf(second)))
	g.Eventually(func() []string {
		var pods corev1.PodList
		g.Expect(k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": "own"})).To(Succeed())
		var reads []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && podReady(&p) {
				reads = append(reads, p.Spec.Containers[0].EnvFrom[0].ConfigMapRef.Name)
			}
		}
		return reads
	}, 2*wait).Should(And(HaveLen(2), HaveEach(pinsOf(second))), "the pods read revision 2's snapshot again")
	g.Expect(get(t, cm).Data).To(Equal(map[string]string{"a": "3"}), "the live ConfigMap untouched")
}
