package integration

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/cause"
	"github.com/watcher-dev/watcher/internal/csi"
	"github.com/watcher-dev/watcher/internal/hold"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/plan"
)

// spcpsCRD reads the Secrets Store CSI Driver's own
// SecretProviderClassPodStatus CRD, which hack/crds.sh copies out of the
// driver's Go module.
func spcpsCRD(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	return cachedCRD(t, "secretproviderclasspodstatus-crd.yaml", "csi")
}

// csiPodSpec mounts the SecretProviderClass class through the driver.
func csiPodSpec(class string) corev1.PodSpec {
	spec := podSpec(corev1.Container{VolumeMounts: []corev1.VolumeMount{{Name: "secrets", MountPath: "/mnt/secrets", ReadOnly: true}}},
		corev1.Volume{Name: "secrets", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
			Driver: "secrets-store.csi.k8s.io", ReadOnly: ptr.To(true),
			VolumeAttributes: map[string]string{"secretProviderClass": class},
		}}})
	return spec
}

// csiPods creates what the deployment controller would for d (no
// controller-manager runs here): a ReplicaSet it controls and n pods the
// ReplicaSet controls. It returns the pods.
func csiPods(t *testing.T, d *appsv1.Deployment, n int) []*corev1.Pod {
	t.Helper()
	d = fetch(t, d)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Name + "-5d8f9c7b6",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(n)), Selector: d.Spec.Selector, Template: d.Spec.Template},
	}
	create(t, rs)
	var pods []*corev1.Pod
	for i := range n {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: fmt.Sprintf("%s-%d", rs.Name, i), Labels: d.Spec.Template.Labels,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
			Spec: d.Spec.Template.Spec,
		}
		create(t, p)
		pods = append(pods, p)
	}
	return pods
}

// installSPCPS installs the driver's SecretProviderClassPodStatus CRD, once
// a previous test's is gone, and waits until its API serves ns; the CRD
// goes when the test ends.
func installSPCPS(t *testing.T, ns string) {
	t.Helper()
	g := NewWithT(t)
	crd := spcpsCRD(t)
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(crd), crd.DeepCopy()))
	},
		wait, 100*time.Millisecond).Should(BeTrue(), "a previous test's CRD is still there")
	create(t, crd)
	t.Cleanup(func() { _ = k8s.Delete(ctx, crd) })
	g.Eventually(func() error {
		return k8s.List(ctx, &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": csi.GVK.GroupVersion().String(), "kind": csi.GVK.Kind + "List"}}, client.InNamespace(ns))
	}, wait, 100*time.Millisecond).Should(Succeed())
}

// statefulPods creates n pods controlled by the StatefulSet s, as its
// controller would.
func statefulPods(t *testing.T, s *appsv1.StatefulSet, n int) []*corev1.Pod {
	t.Helper()
	s = fetch(t, s)
	var pods []*corev1.Pod
	for i := range n {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: fmt.Sprintf("%s-%d", s.Name, i), Labels: s.Spec.Template.Labels,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: s.Name, UID: s.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
			Spec: s.Spec.Template.Spec,
		}
		create(t, p)
		pods = append(pods, p)
	}
	return pods
}

// writeStatus creates or updates the SecretProviderClassPodStatus of pod
// and class as the driver does (createOrUpdateSecretProviderClassPodStatus
// of its pkg/secrets-store): named pod-namespace-class, labelled with the
// node, owned by the pod, the objects ordered by id.
func writeStatus(t *testing.T, pod *corev1.Pod, class string, versions map[string]string) {
	t.Helper()
	var objects []any
	ids := make([]string, 0, len(versions))
	for id := range versions {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		objects = append(objects, map[string]any{"id": id, "version": versions[id]})
	}
	status := map[string]any{
		"podName": pod.Name, "secretProviderClassName": class, "mounted": true, "objects": objects,
		"targetPath": "/var/lib/kubelet/pods/" + string(pod.UID) + "/volumes/kubernetes.io~csi/secrets/mount",
	}
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(csi.GVK)
	u.SetNamespace(pod.Namespace)
	u.SetName(pod.Name + "-" + pod.Namespace + "-" + class)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := u.DeepCopy()
		err := k8s.Get(ctx, client.ObjectKeyFromObject(u), cur)
		if apierrors.IsNotFound(err) {
			n := u.DeepCopy()
			n.SetLabels(map[string]string{"internal.secrets-store.csi.k8s.io/node-name": "node-1"})
			n.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}})
			n.Object["status"] = status
			return k8s.Create(ctx, n)
		}
		if err != nil {
			return err
		}
		cur.Object["status"] = status
		return k8s.Update(ctx, cur)
	})
	if err != nil {
		t.Fatalf("write status of %s: %v", pod.Name, err)
	}
}

// TestCSIRotation: with --csi, watcher follows the driver's
// SecretProviderClassPodStatus CRD (its own, from its Go module) once it
// is installed. A Deployment that opts in (secretproviderclass.reloader.
// stakater.com/reload) has three pods, each with its status: the first
// versions are adopted, nothing restarts. A rotation rewrites the three
// statuses with a new version of one object: the Deployment restarts
// once, with one Restarted Event naming the class and the object. The
// same rotation on a Deployment that did not opt in restarts nothing; on
// a StatefulSet that opted in to every class it mounts
// (secretproviderclass.reloader.stakater.com/auto), it restarts it. A
// new watcher sees the statuses again at start-up, equal to the record:
// nothing restarts; a rotation made while no watcher ran restarts once.
//
// Not parallel: the CRD is cluster-wide.
func TestCSIRotation(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	web := annotated(ns, "web", csiPodSpec("db-creds"), map[string]string{"secretproviderclass.reloader.stakater.com/reload": "db-creds"})
	other := deployment(ns, "other", csiPodSpec("db-creds"))
	db := statefulSet(ns, "db", csiPodSpec("db-creds"))
	db.Annotations = map[string]string{"secretproviderclass.reloader.stakater.com/auto": "true"}
	webRollouts, otherRollouts, dbRollouts := track(t, web), track(t, other), track(t, db)
	withCSI := func(o *options.Options) { o.CSI = true }
	w := startWatcher(t, ns, withCSI)

	installSPCPS(t, ns)
	webPods, otherPods, dbPods := csiPods(t, web, 3), csiPods(t, other, 3), statefulPods(t, db, 2)
	v1 := map[string]string{"secret/db-password": "v1", "secret/db-user": "v1"}
	for _, p := range append(append(webPods, otherPods...), dbPods...) {
		writeStatus(t, p, "db-creds", v1)
	}
	g.Eventually(func() string { return fetch(t, web).Annotations[plan.RecordAnnotation] }, wait, 20*time.Millisecond).
		Should(ContainSubstring("SecretProviderClass/db-creds"), "the class's versions adopted")
	waitAdopted(t, db)
	stayRollouts(t, webRollouts, 0)
	stayRollouts(t, dbRollouts, 0)
	g.Expect(recorded(t, ns, "other")).To(BeFalse(), "a Deployment that did not opt in is not written")

	rotated := map[string]string{"secret/db-password": "v2", "secret/db-user": "v1"}
	for _, p := range append(append(webPods, otherPods...), dbPods...) {
		writeStatus(t, p, "db-creds", rotated)
	}
	waitRollouts(t, webRollouts, 1)
	waitRollouts(t, dbRollouts, 1)
	waitRestarted(t, ns, "db", "SecretProviderClass db-creds rotated (objects: secret/db-password;")
	waitRestarted(t, ns, "web", "SecretProviderClass db-creds rotated (objects: secret/db-password;")
	stayRollouts(t, webRollouts, 1)
	stayRollouts(t, otherRollouts, 0)
	g.Expect(events(t, ns, "web", cause.ReasonRestarted)).To(HaveLen(1), "one Event for one rotation of three pods")
	g.Expect(events(t, ns, "other", cause.ReasonRestarted)).To(BeEmpty())
	g.Expect(recorded(t, ns, "other")).To(BeFalse())

	// The record is in the cluster: a new watcher restarts nothing for the
	// versions it already restarted for, and catches a rotation made while
	// none ran.
	w.Stop()
	w = startWatcher(t, ns, withCSI)
	waitLog(t, w, `"kind"="SecretProviderClassPodStatus"`)
	stayRollouts(t, webRollouts, 1)
	w.Stop()
	again := map[string]string{"secret/db-password": "v2", "secret/db-user": "v7"}
	for _, p := range webPods {
		writeStatus(t, p, "db-creds", again)
	}
	startWatcher(t, ns, withCSI)
	waitRollouts(t, webRollouts, 2)
	waitRestarted(t, ns, "web", "SecretProviderClass db-creds rotated (objects: secret/db-user;")
	stayRollouts(t, webRollouts, 2)
	g.Expect(events(t, ns, "web", cause.ReasonRestarted)).To(HaveLen(2))
	t.Logf("Events: %q", events(t, ns, "web", cause.ReasonRestarted))
}

// TestCSIGuards: a rotation restarts through the guards like any change:
// with a budget of one restart an hour, the first rotation restarts the
// Deployment and the second is held, with a RestartHeld Event.
//
// Not parallel: the CRD is cluster-wide.
func TestCSIGuards(t *testing.T) {
	ns := namespace(t)
	web := annotated(ns, "web", csiPodSpec("db-creds"), map[string]string{"reloader.stakater.com/auto": "true"})
	rollouts := track(t, web)
	startWatcher(t, ns, func(o *options.Options) {
		o.CSI = true
		o.RestartBudget = options.Rate{Count: 1, Per: time.Hour}
	})
	installSPCPS(t, ns)
	pods := csiPods(t, web, 2)
	for _, version := range []string{"v1", "v2", "v3"} {
		for _, p := range pods {
			writeStatus(t, p, "db-creds", map[string]string{"secret/api-key": version})
		}
		switch version {
		case "v1":
			waitAdopted(t, web)
		case "v2":
			waitRollouts(t, rollouts, 1)
			waitRestarted(t, ns, "web", "SecretProviderClass db-creds rotated (objects: secret/api-key;")
		case "v3":
			waitEvent(t, ns, "web", hold.ReasonRestartHeld)
		}
	}
	stayRollouts(t, rollouts, 1)
	NewWithT(t).Expect(events(t, ns, "web", cause.ReasonRestarted)).To(HaveLen(1))
}

// TestCSIBounds: a status over csi's limits (MaxObjects objects, an id
// over MaxIDBytes) is watched within them: the record holds at most
// MaxObjects+1 keys for the class, the objects past the limit folded into
// one (csi.FoldedID), and a rotation of one of those still restarts the
// workload once. The two pods' statuses over the limits are reported once
// each in watcher_errors_total{operation="csi-limit"} and once on the
// workload (a Warning Event SecretProviderClassOverLimit), not again when
// a rotation keeps their shape; a workload that did not opt in gets no
// Event.
//
// Not parallel: the CRD is cluster-wide.
func TestCSIBounds(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	web := annotated(ns, "web", csiPodSpec("db-creds"), map[string]string{"secretproviderclass.reloader.stakater.com/reload": "db-creds"})
	other := deployment(ns, "other", csiPodSpec("db-creds"))
	rollouts, otherRollouts := track(t, web), track(t, other)
	before := testutil.ToFloat64(metrics.Errors.WithLabelValues("csi-limit"))
	startWatcher(t, ns, func(o *options.Options) { o.CSI = true })
	installSPCPS(t, ns)
	pods, otherPods := csiPods(t, web, 2), csiPods(t, other, 1)
	versions := map[string]string{"secret/" + strings.Repeat("l", csi.MaxIDBytes): "v1"}
	for i := range csi.MaxObjects + 44 {
		versions[fmt.Sprintf("secret/obj-%03d", i)] = "v1"
	}
	for _, p := range append(pods, otherPods...) {
		writeStatus(t, p, "db-creds", versions)
	}
	waitAdopted(t, web)
	waitEvent(t, ns, "web", csi.ReasonOverLimit, "lists 301 objects", `the other 45 together as "(other objects)"`, "ids longer than 512 bytes or not printable (1 of them)")
	rec, err := plan.ParseRecord(fetch(t, web).Annotations[plan.RecordAnnotation])
	g.Expect(err).NotTo(HaveOccurred())
	entry := rec["SecretProviderClass/db-creds"]
	g.Expect(entry).NotTo(BeNil())
	g.Expect(entry.Keys).To(HaveLen(csi.MaxObjects+1), "the objects past the limit are one key")
	g.Expect(entry.Keys).To(HaveKey(csi.FoldedID))
	g.Eventually(func() float64 { return testutil.ToFloat64(metrics.Errors.WithLabelValues("csi-limit")) - before }, wait).
		Should(Equal(3.0), "each status over the limits counted once")

	// The last object by id is folded: its rotation restarts web once.
	versions["secret/obj-299"] = "v2"
	for _, p := range append(pods, otherPods...) {
		writeStatus(t, p, "db-creds", versions)
	}
	waitRollouts(t, rollouts, 1)
	waitRestarted(t, ns, "web", "SecretProviderClass db-creds rotated (objects: "+csi.FoldedID+";")
	stayRollouts(t, rollouts, 1)
	stayRollouts(t, otherRollouts, 0)
	g.Expect(events(t, ns, "web", csi.ReasonOverLimit)).To(HaveLen(1), "reported once for the two pods and the rotation")
	g.Expect(events(t, ns, "other", csi.ReasonOverLimit)).To(BeEmpty(), "not opted in: no Event")
	g.Expect(testutil.ToFloat64(metrics.Errors.WithLabelValues("csi-limit"))-before).To(Equal(3.0), "a rotation of the same shape is not counted again")
	t.Logf("Events: %q", events(t, ns, "web", csi.ReasonOverLimit))
}
