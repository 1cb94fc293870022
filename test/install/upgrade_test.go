package install

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestUpgrade walks the install paths of a real cluster one after the
// other, in the namespace watcher, with a user's Deployment that watcher
// adopted under the first: none restarts the Deployment (its ReplicaSets
// stay), none loses the hash key (its Secret keeps its data and the
// Deployment's record keeps its key ID, so nothing is adopted again), and
// after each one a change of the Deployment's ConfigMap restarts it exactly
// once, with the rights of the new ServiceAccount.
//
//	the plain manifests of deploy/ before the chart (testdata/v0)
//	-> the chart, helm install (after the commands of the README)
//	-> helm upgrade with other values (3 replicas, the CronJob trigger)
//	-> helm uninstall, then kubectl apply -f deploy/manifests/watcher.yaml
func TestUpgrade(t *testing.T) {
	g := NewWithT(t)
	const ns = "watcher"
	namespace(t, "apps-u", nil)
	a := newApp(t, "apps-u")
	u := &upgrade{app: a}

	// Before the chart: the RBAC and lease-mode Deployment of deploy/.
	mustKubectl(t, "apply", "-f", filepath.Join("testdata", "v0", "rbac.yaml"), "-f", filepath.Join("testdata", "v0", "watcher-lease.yaml"))
	old := deployment(t, readObjects(t, filepath.Join("testdata", "v0", "watcher-lease.yaml")))
	u.first(t, old, tokenKubeconfig(t, ns, "watcher"))

	// To the chart: the README's commands.
	mustKubectl(t, "-n", ns, "delete", "deployment,serviceaccount,role,rolebinding", "watcher")
	mustKubectl(t, "delete", "clusterrole,clusterrolebinding", "watcher")
	mustHelm(t, "install", "watcher", chart, "-n", ns, "--wait", "--timeout=60s")
	u.next(t, "helm install", release(t, ns), 1)

	// helm upgrade with other values.
	mustHelm(t, "upgrade", "watcher", chart, "-n", ns, "--wait", "--timeout=60s",
		"-f", filepath.Join(chart, "examples", "lease-ha.yaml"), "--set", "restart.cronjobTrigger=true")
	d := release(t, ns)
	g.Expect(*d.Spec.Replicas).To(Equal(int32(3)))
	u.next(t, "helm upgrade", d, 3)

	// helm uninstall keeps the key; the one-file manifests take over.
	mustHelm(t, "uninstall", "watcher", "-n", ns, "--wait")
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "watcher-hash-key"}, &corev1.Secret{})).To(Succeed(), "helm uninstall keeps the hash key")
	manifests := filepath.Join(root, "deploy", "manifests", "watcher.yaml")
	mustKubectl(t, "apply", "-f", manifests)
	mustKubectl(t, "-n", ns, "rollout", "status", "deployment/watcher", "--timeout=60s")
	u.next(t, "kubectl apply", deployment(t, readObjects(t, manifests)), 1)
}

// upgrade is the state carried from one install path to the next.
type upgrade struct {
	app      *app
	rollouts int
	record   string
	keyID    string
	key      []byte
}

// first runs watcher as Deployment d says, with the rights of the token in
// kubeconfig, until it adopted the app, and remembers the key and record.
func (u *upgrade) first(t *testing.T, d *appsv1.Deployment, kubeconfig string) {
	t.Helper()
	w := startWatcher(t, watcherBin, d, kubeconfig, nil)
	u.app.waitAdopted(t)
	u.app.stayRollouts(t, 0, time.Second)
	noForbidden(t, w)
	w.Stop()
	u.record, u.keyID = u.app.record(t)
	u.key = hashKey(t)
}

// next checks an install path: the release's pods are ready; watcher, run as
// its Deployment d says with a token of its ServiceAccount, restarts
// nothing, keeps the key and the record, and restarts the app once for a
// change.
func (u *upgrade) next(t *testing.T, path string, d *appsv1.Deployment, replicas int) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func() int { return readyPods(t, d.Namespace) }, wait, 100*time.Millisecond).Should(Equal(replicas), "%s: ready pods", path)
	w := startWatcher(t, watcherBin, d, tokenKubeconfig(t, d.Namespace, d.Spec.Template.Spec.ServiceAccountName), nil)
	u.app.stayRollouts(t, u.rollouts, 2*time.Second)
	record, keyID := u.app.record(t)
	g.Expect(keyID).To(Equal(u.keyID), "%s: the record's key ID", path)
	g.Expect(record).To(Equal(u.record), "%s: the record", path)
	g.Expect(bytes.Equal(hashKey(t), u.key)).To(BeTrue(), "%s: the hash key Secret keeps its key", path)

	u.app.change(t, path)
	u.rollouts++
	u.app.waitRollouts(t, u.rollouts)
	u.app.stayRollouts(t, u.rollouts, time.Second)
	noForbidden(t, w)
	w.Stop()
	u.record, _ = u.app.record(t)
}

// release returns the Deployment of the helm release watcher in ns.
func release(t *testing.T, ns string) *appsv1.Deployment {
	t.Helper()
	return deployment(t, decode(t, []byte(mustHelm(t, "get", "manifest", "watcher", "-n", ns))))
}

// hashKey returns the key held by the Secret watcher/watcher-hash-key.
func hashKey(t *testing.T) []byte {
	t.Helper()
	s := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "watcher", Name: "watcher-hash-key"}, s); err != nil {
		t.Fatal(err)
	}
	return s.Data["key"]
}
