package install

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/test/fixture"
	"github.com/watcher-dev/watcher/test/observe"
)

// app is a user's workload: a Deployment reading every key of a ConfigMap.
type app struct {
	cm  *corev1.ConfigMap
	dep *appsv1.Deployment
	tr  *observe.Tracker
}

// newApp creates the ConfigMap cfg and the Deployment web in ns and tracks
// the Deployment's rollouts until the test ends.
func newApp(t *testing.T, ns string) *app {
	t.Helper()
	return newNamedApp(t, ns, "cfg", "web", nil)
}

// newNamedApp creates the ConfigMap cm and the Deployment dep, with the
// annotations given, in ns and tracks the Deployment's rollouts until the
// test ends.
func newNamedApp(t *testing.T, ns, cm, dep string, annotations map[string]string) *app {
	t.Helper()
	a := &app{
		cm:  fixture.ConfigMap(ns, cm, map[string]string{"a": "1"}),
		dep: fixture.Deployment(ns, dep, fixture.EnvFrom(cm, "")),
	}
	a.dep.Annotations = annotations
	if err := k8s.Create(ctx, a.cm); err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	var err error
	if a.tr, err = observe.Track(c, kube.RESTConfig(), a.dep); err != nil {
		t.Fatal(err)
	}
	return a
}

// record returns the Deployment's record of the hashes its pods started
// with, and the ID of the hash key that made it.
func (a *app) record(t *testing.T) (string, string) {
	t.Helper()
	ann := get(t, a.dep).GetAnnotations()
	return ann[plan.RecordAnnotation], ann[plan.HashKeyAnnotation]
}

// waitAdopted waits until a watcher recorded the Deployment's hashes.
func (a *app) waitAdopted(t *testing.T) {
	t.Helper()
	NewWithT(t).Eventually(func() string { r, _ := a.record(t); return r }, wait, 50*time.Millisecond).
		ShouldNot(BeEmpty(), "Deployment %s/%s not adopted", a.dep.Namespace, a.dep.Name)
}

// change sets the ConfigMap's key a to v.
func (a *app) change(t *testing.T, v string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(a.cm), a.cm); err != nil {
			return err
		}
		a.cm.Data["a"] = v
		return k8s.Update(ctx, a.cm)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitRollouts waits until the Deployment rolled n times since it was
// created, by its pod template and by its ReplicaSets (one per template).
func (a *app) waitRollouts(t *testing.T, n int) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(a.tr.Count, wait, 20*time.Millisecond).Should(Equal(n), "rollouts of %s", a.tr.Name)
	g.Eventually(func() int { return a.replicaSets(t) }, wait, 50*time.Millisecond).Should(Equal(n+1), "ReplicaSets of %s", a.tr.Name)
}

// stayRollouts checks that the Deployment does not roll for d.
func (a *app) stayRollouts(t *testing.T, n int, d time.Duration) {
	t.Helper()
	NewWithT(t).Consistently(a.tr.Count, d, 50*time.Millisecond).Should(Equal(n), "rollouts of %s", a.tr.Name)
	NewWithT(t).Expect(a.replicaSets(t)).To(Equal(n+1), "ReplicaSets of %s", a.tr.Name)
}

// replicaSets counts the ReplicaSets the Deployment owns.
func (a *app) replicaSets(t *testing.T) int {
	t.Helper()
	var rss appsv1.ReplicaSetList
	if err := k8s.List(ctx, &rss, client.InNamespace(a.dep.Namespace)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, rs := range rss.Items {
		for _, o := range rs.OwnerReferences {
			if o.Kind == "Deployment" && o.Name == a.dep.Name {
				n++
			}
		}
	}
	return n
}
