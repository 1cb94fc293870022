package e2e

import (
	"context"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/cause"
	"github.com/watcher-dev/watcher/internal/csi"
	"github.com/watcher-dev/watcher/test/fixture"
)

// fakeDriver plays the Secrets Store CSI Driver for the pods of one app
// mounting one SecretProviderClass: it writes each pod's
// SecretProviderClassPodStatus as the driver does
// (createOrUpdateSecretProviderClassPodStatus of its pkg/secrets-store):
// at mount, with the provider's versions of then; at a rotation, the new
// versions into the status of every pod running.
type fakeDriver struct {
	t          *testing.T
	ns, app    string
	class      string
	mu         sync.Mutex
	versions   map[string]string
	mounted    map[string]bool // pod UIDs
	mountedNum int
}

// startDriver mounts class in the pods of app in ns, with versions, until
// the test ends.
func startDriver(t *testing.T, ns, app, class string, versions map[string]string) *fakeDriver {
	d := &fakeDriver{t: t, ns: ns, app: app, class: class, versions: versions, mounted: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			d.mount(ctx)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return d
}

// pods returns the pods of the app that are not terminating.
func (d *fakeDriver) pods(ctx context.Context) []corev1.Pod {
	var list corev1.PodList
	if err := k8s.List(ctx, &list, client.InNamespace(d.ns), client.MatchingLabels{"app": d.app}); err != nil {
		return nil
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// mount writes the status of every pod not mounted yet.
func (d *fakeDriver) mount(ctx context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range d.pods(ctx) {
		if !d.mounted[string(p.UID)] && d.write(ctx, &p) == nil {
			d.mounted[string(p.UID)] = true
			d.mountedNum++
		}
	}
}

// rotate makes versions the provider's (what new mounts get) and writes
// them into the status of n of the pods mounted: the driver's rotation
// reaches pods at different times, and the first may be rotated long
// before the others.
func (d *fakeDriver) rotate(versions map[string]string, n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.versions = versions
	for _, p := range d.pods(ctx) {
		if n > 0 && d.mounted[string(p.UID)] {
			if err := d.write(ctx, &p); err != nil {
				d.t.Errorf("rotate %s: %v", p.Name, err)
			}
			n--
		}
	}
}

// mounts returns how many pods were mounted.
func (d *fakeDriver) mounts() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mountedNum
}

func (d *fakeDriver) write(ctx context.Context, pod *corev1.Pod) error {
	ids := make([]string, 0, len(d.versions))
	for id := range d.versions {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var objects []any
	for _, id := range ids {
		objects = append(objects, map[string]any{"id": id, "version": d.versions[id]})
	}
	status := map[string]any{
		"podName": pod.Name, "secretProviderClassName": d.class, "mounted": true, "objects": objects,
		"targetPath": "/var/lib/kubelet/pods/" + string(pod.UID) + "/volumes/kubernetes.io~csi/secrets/mount",
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": status}}
	u.SetGroupVersionKind(csi.GVK)
	u.SetNamespace(pod.Namespace)
	u.SetName(pod.Name + "-" + pod.Namespace + "-" + d.class)
	u.SetLabels(map[string]string{"internal.secrets-store.csi.k8s.io/node-name": pod.Spec.NodeName})
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}})
	err := k8s.Create(ctx, u.DeepCopy())
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	cur := u.DeepCopy()
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(u), cur); err != nil {
		return err
	}
	cur.Object["status"] = status
	cur.SetOwnerReferences(u.GetOwnerReferences())
	return k8s.Update(ctx, cur)
}

// TestCSIRotationRollout: a Deployment of three pods mounts a
// SecretProviderClass through the (fake) driver and opts in to its
// rotations. The first versions are adopted. A rotation writes a new
// version into the status of one pod (the driver reaches the others
// later): the Deployment rolls once (one new ReplicaSet), its new pods
// mount the new versions, the old pods, still on the old versions, go, and
// nothing rolls again, back or forth; one Restarted Event names the class
// and the object. A second rotation reaching every pod rolls it once more.
func TestCSIRotationRollout(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	installCRD(t, filepath.Join(hack(t, "crds.sh", "csi"), "secretproviderclasspodstatus-crd.yaml"),
		csi.GVK.GroupVersion().WithKind(csi.GVK.Kind+"List"), ns)
	w := startWatcher(t, "watcher", ns, "--csi")
	w.WaitReady(t)
	waitLeader(t, []*proc{w})

	spec := fixture.PodSpec(corev1.Container{VolumeMounts: []corev1.VolumeMount{{Name: "secrets", MountPath: "/mnt/secrets", ReadOnly: true}}},
		corev1.Volume{Name: "secrets", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
			Driver: "secrets-store.csi.k8s.io", ReadOnly: ptr.To(true), VolumeAttributes: map[string]string{"secretProviderClass": "db-creds"},
		}}})
	dep := fixture.Deployment(ns, "web", spec)
	dep.Spec.Replicas = ptr.To(int32(3))
	dep.Annotations = map[string]string{"secretproviderclass.reloader.stakater.com/reload": "db-creds"}
	drv := startDriver(t, ns, "web", "db-creds", map[string]string{"secret/db-password": "1", "secret/db-user": "1"})
	tr := track(t, dep)
	waitRunning(t, dep)
	g.Eventually(drv.mounts, wait, 50*time.Millisecond).Should(Equal(3))
	g.Eventually(func() string { return get(t, dep).Annotations["watcher.dev/config-hashes"] }, wait, 50*time.Millisecond).
		Should(ContainSubstring("SecretProviderClass/db-creds"))
	stayRollouts(t, tr, 0, quietE2E)

	drv.rotate(map[string]string{"secret/db-password": "2", "secret/db-user": "1"}, 1)
	waitRollouts(t, tr, 1)
	waitRestarted(t, ns, "web", "SecretProviderClass db-creds rotated (objects: secret/db-password;")
	waitRunning(t, dep)
	g.Eventually(drv.mounts, wait, 50*time.Millisecond).Should(Equal(6), "the new pods mount")
	stayRollouts(t, tr, 1, quietE2E)
	g.Expect(replicaSets(t, dep)).To(Equal(2), "one new ReplicaSet")
	g.Expect(events(t, ns, "Deployment", cause.ReasonRestarted)).To(HaveLen(1), "one Restarted Event")

	drv.rotate(map[string]string{"secret/db-password": "2", "secret/db-user": "2"}, 3)
	waitRollouts(t, tr, 2)
	waitRestarted(t, ns, "web", "SecretProviderClass db-creds rotated (objects: secret/db-user;")
	waitRunning(t, dep)
	stayRollouts(t, tr, 2, quietE2E)
	g.Expect(replicaSets(t, dep)).To(Equal(3))
	g.Expect(events(t, ns, "Deployment", cause.ReasonRestarted)).To(HaveLen(2))
}
