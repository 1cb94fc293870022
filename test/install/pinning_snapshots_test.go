package install

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/pin"
)

// madeByWatcher is the snapshot watcher makes of a ConfigMap app in
// namespace apps, owned by its Deployment, as package snapshot sets it.
func madeByWatcher(apps string) client.Object {
	src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "app", Labels: map[string]string{"team": "a"},
		Annotations: map[string]string{"argocd.argoproj.io/tracking-id": "x"}}, Data: map[string]string{"k": "v"}}
	snap := pin.Snapshot(src, pin.SnapshotName("app", strings.Repeat("0a", 32)), owner("Deployment"))
	snap.GetAnnotations()[pin.ChangedBy] = "kubectl-edit,helm"
	snap.GetAnnotations()[pin.Bytes] = "2"
	return snap
}

// pinningSnapshots checks, as watcher's ServiceAccount ns/sa, what the
// policy <release>-snapshots admits in namespace apps: the creation of
// snapshots shaped as watcher makes them, and a change of their owners;
// nothing else, though RBAC grants create and patch on every ConfigMap and
// Secret there. What watcher writes in its own namespace is admitted as
// before. Every write is a dry run.
func pinningSnapshots(t *testing.T, ns, sa, apps string) {
	c := as(t, ns, sa)
	create := func(obj client.Object) func() error {
		return func() error { return c.Create(ctx, obj.DeepCopyObject().(client.Object), client.DryRunAll) }
	}
	cm := func(edit func(*corev1.ConfigMap)) *corev1.ConfigMap { return snapshotConfigMap(apps, edit) }
	secret := func(edit func(*corev1.Secret)) *corev1.Secret { return snapshotSecret(apps, edit) }
	long := strings.Repeat("l", 240)

	for _, tc := range []struct {
		name string
		obj  client.Object
	}{
		{"a ConfigMap snapshot owned by its Deployment", cm(nil)},
		{"a snapshot as watcher's own code makes it (pin.Snapshot), with who wrote it", madeByWatcher(apps)},
		{"a Secret snapshot owned by its Deployment", secret(nil)},
		{"a snapshot owned by ReplicaSets and ControllerRevisions", cm(func(c *corev1.ConfigMap) {
			c.OwnerReferences = []metav1.OwnerReference{owner("ReplicaSet"), owner("ControllerRevision"), owner("StatefulSet"), owner("DaemonSet")}
		})},
		{"a snapshot owned by a Rollout", secret(func(s *corev1.Secret) { s.OwnerReferences = []metav1.OwnerReference{owner("Rollout")} })},
		{"a snapshot of a TLS Secret", secret(func(s *corev1.Secret) {
			s.Type = corev1.SecretTypeTLS
			s.Data = map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k")}
		})},
		{"a snapshot of a source whose name is cut", cm(func(c *corev1.ConfigMap) {
			c.Name = long[:253-25] + "-pin-0123456789abcdef0123"
			c.Annotations[snapshotOf] = "configmap/" + long
		})},
	} {
		t.Run("admitted: "+tc.name, func(t *testing.T) { NewWithT(t).Eventually(create(tc.obj), wait).Should(Succeed()) })
	}

	// A Secret refused: by the policy <release>-creates (the hash key
	// only, and snapshots) or by the snapshots' policy, whichever the API
	// server answers first.
	secretRefused := MatchRegexp("watcher may create only (its hash key Secret|snapshots)")
	for _, tc := range []struct {
		name string
		obj  client.Object
		want string
	}{
		{"a ConfigMap", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "app"}}, snapshotsRefused},
		{"a snapshot not immutable", cm(func(c *corev1.ConfigMap) { c.Immutable = nil }), snapshotsRefused},
		{"a snapshot immutable: false", cm(func(c *corev1.ConfigMap) { c.Immutable = ptr.To(false) }), snapshotsRefused},
		{"a snapshot without the label", cm(func(c *corev1.ConfigMap) { c.Labels = nil }), snapshotsRefused},
		{"a snapshot with the label false", cm(func(c *corev1.ConfigMap) { c.Labels[snapshotLabel] = "false" }), snapshotsRefused},
		{"a snapshot with another label", cm(func(c *corev1.ConfigMap) { c.Labels["app"] = "web" }), snapshotsRefused},
		{"a snapshot with another annotation", cm(func(c *corev1.ConfigMap) { c.Annotations["argocd.argoproj.io/tracking-id"] = "x" }), snapshotsRefused},
		{"a snapshot whose size is no number", cm(func(c *corev1.ConfigMap) { c.Annotations[pin.Bytes] = "1e9" }), snapshotsRefused},
		{"a snapshot without snapshot-of", cm(func(c *corev1.ConfigMap) { c.Annotations = nil }), snapshotsRefused},
		{"a ConfigMap snapshot of a Secret", cm(func(c *corev1.ConfigMap) { c.Annotations[snapshotOf] = "secret/app" }), snapshotsRefused},
		{"a snapshot named without -pin-", cm(func(c *corev1.ConfigMap) { c.Name = "app-0123456789abcdef0123" }), snapshotsRefused},
		{"a snapshot named with a short digest", cm(func(c *corev1.ConfigMap) { c.Name = "app-pin-0123" }), snapshotsRefused},
		{"a snapshot named for another source", cm(func(c *corev1.ConfigMap) { c.Name = "db-pin-0123456789abcdef0123" }), snapshotsRefused},
		{"a snapshot with a controller owner", cm(func(c *corev1.ConfigMap) { c.OwnerReferences[0].Controller = ptr.To(true) }), ownersRefused},
		{"a snapshot blocking its owner's deletion", cm(func(c *corev1.ConfigMap) { c.OwnerReferences[0].BlockOwnerDeletion = ptr.To(true) }), ownersRefused},
		{"a snapshot owned by a ConfigMap", cm(func(c *corev1.ConfigMap) {
			c.OwnerReferences = append(c.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "8d5c2f1e-0000-4000-8000-0000000000bb"})
		}), ownersRefused},
		{"a snapshot owned by a Deployment of another group", cm(func(c *corev1.ConfigMap) { c.OwnerReferences[0].APIVersion = "example.com/v1" }), ownersRefused},
	} {
		t.Run("refused: "+tc.name, func(t *testing.T) { deniedBy(t, create(tc.obj), ContainSubstring(tc.want), tc.name) })
	}
	for _, tc := range []struct {
		name string
		obj  client.Object
	}{
		{"a Secret", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "db"}}},
		{"a Secret snapshot not immutable", secret(func(s *corev1.Secret) { s.Immutable = nil })},
		{"a Secret snapshot of a ConfigMap", secret(func(s *corev1.Secret) { s.Annotations[snapshotOf] = "configmap/db" })},
		{"a Secret snapshot of a service-account token", secret(func(s *corev1.Secret) {
			s.Type, s.Data = corev1.SecretTypeServiceAccountToken, nil
			s.Annotations[corev1.ServiceAccountNameKey] = "default"
		})},
	} {
		t.Run("refused: "+tc.name, func(t *testing.T) { deniedBy(t, create(tc.obj), secretRefused, tc.name) })
	}

	// Updates (patches) of snapshots the admin made, and of objects that
	// are no snapshots.
	storedCM, storedSecret := cm(nil), secret(nil)
	impostor := cm(func(c *corev1.ConfigMap) { c.Name, c.Immutable = "web-pin-0123456789abcdef0123", nil }) // labelled, mutable
	impostor.Annotations[snapshotOf] = "configmap/web"
	plainCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "plain"}, Data: map[string]string{"k": "v"}}
	plainSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "plain"}, Data: map[string][]byte{"k": []byte("v")}}
	for _, o := range []client.Object{storedCM, storedSecret, impostor, plainCM, plainSecret} {
		o.SetOwnerReferences(nil) // the admin's copies are owned by nothing, so the collector leaves them
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
		t.Cleanup(func() { _ = k8s.Delete(ctx, o) })
	}
	patch := func(obj client.Object, edit func(client.Object)) func() error {
		return func() error {
			cur := obj.DeepCopyObject().(client.Object)
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
				return err
			}
			next := cur.DeepCopyObject().(client.Object)
			edit(next)
			return c.Patch(ctx, next, client.MergeFrom(cur), client.DryRunAll)
		}
	}
	owners := func(refs ...metav1.OwnerReference) func(client.Object) {
		return func(o client.Object) { o.SetOwnerReferences(refs) }
	}
	for _, tc := range []struct {
		name string
		obj  client.Object
		edit func(client.Object)
	}{
		{"the owners of a ConfigMap snapshot", storedCM, owners(owner("ReplicaSet"))},
		{"the owners of a Secret snapshot", storedSecret, owners(owner("ReplicaSet"), owner("ControllerRevision"))},
	} {
		t.Run("admitted: a change of "+tc.name, func(t *testing.T) { NewWithT(t).Eventually(patch(tc.obj, tc.edit), wait).Should(Succeed()) })
	}
	for _, tc := range []struct {
		name string
		obj  client.Object
		edit func(client.Object)
		want string
	}{
		{"a snapshot's labels", storedCM, func(o client.Object) { o.SetLabels(withLabels(o.GetLabels(), map[string]string{"app": "web"})) }, changesRefused},
		{"a snapshot's label removed", storedSecret, func(o client.Object) { o.SetLabels(nil) }, changesRefused},
		{"a snapshot's annotations", storedCM, func(o client.Object) { o.SetAnnotations(map[string]string{snapshotOf: "configmap/other"}) }, changesRefused},
		{"a snapshot's finalizers", storedCM, func(o client.Object) { o.SetFinalizers([]string{"example.com/keep"}) }, changesRefused},
		{"a labelled ConfigMap that is not immutable", impostor, func(o client.Object) { o.(*corev1.ConfigMap).Data["k"] = "w" }, changesRefused},
		{"the owners of a labelled ConfigMap that is not immutable", impostor, owners(owner("ReplicaSet")), changesRefused},
		{"the owners of a ConfigMap that is no snapshot", plainCM, owners(owner("ReplicaSet")), changesRefused},
		{"the data of a ConfigMap that is no snapshot", plainCM, func(o client.Object) { o.(*corev1.ConfigMap).Data["k"] = "w" }, changesRefused},
		{"the owners of a Secret that is no snapshot", plainSecret, owners(owner("ReplicaSet")), changesRefused},
		{"a snapshot's owner to a controller", storedCM, owners(func() metav1.OwnerReference {
			r := owner("ReplicaSet")
			r.Controller = ptr.To(true)
			return r
		}()), ownersRefused},
	} {
		t.Run("refused: a change of "+tc.name, func(t *testing.T) { deniedBy(t, patch(tc.obj, tc.edit), ContainSubstring(tc.want), tc.name) })
	}
	// The data of an immutable snapshot: the API server's own validation
	// refuses it before any policy.
	t.Run("refused: a change of a snapshot's data", func(t *testing.T) {
		NewWithT(t).Expect(patch(storedSecret, func(o client.Object) { o.(*corev1.Secret).Data["k"] = []byte("w") })()).To(HaveOccurred())
	})

	// watcher's own namespace: the settings it publishes and its hash key
	// Secret are written as before.
	t.Run("admitted: watcher's own ConfigMap and hash key Secret", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pn-watcher-settings"}}, client.DryRunAll)).To(Succeed())
		g.Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pn-watcher-hash-key"}, Type: corev1.SecretTypeOpaque}, client.DryRunAll)).To(Succeed())
		deniedBy(t, create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"}}), secretRefused, "another Secret in its namespace")
	})
}
