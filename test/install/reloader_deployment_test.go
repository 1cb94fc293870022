package install

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	reloaderrbac "github.com/watcher-dev/watcher/deploy/reloader"
	"github.com/watcher-dev/watcher/test/fixture"
	"github.com/watcher-dev/watcher/test/observe"
)

// reloaderNamespace is the namespace of the fixture's renders of Reloader's
// chart, and of deploy/reloader's RBAC.
const reloaderNamespace = "reloader"

// TestReloaderDeployment runs watcher as Stakater Reloader's own Deployment
// runs it once its image is swapped for watcher's: the Deployment and RBAC
// that Reloader's real chart renders (test/fixture/reloader) for several
// value sets, plus deploy/reloader's RBAC (rbac.yaml, or
// rbac-namespaced.yaml with watchGlobally: false, as watcher migrate prints
// it); the binary with exactly that
// container's args and env, a token of Reloader's ServiceAccount, and
// Reloader's own probes (GET /live and /metrics on the port named http),
// which must pass. Then, per value set:
//
//   - watcher's own state (Lease, hash key Secret, settings ConfigMap) is
//     in Reloader's namespace;
//   - a Deployment annotated reloader.stakater.com/auto rolls once (one
//     more ReplicaSet) when its ConfigMap changes; one not annotated, reading
//     the same ConfigMap, does not (Reloader's chart: annotated discovery);
//   - Reloader's reloader_reload_executed_total{success="true"} is 1 on
//     Reloader's /metrics, and reloader_reload_executed_total_by_namespace
//     is there exactly with enableMetricsByNamespace;
//   - with watchGlobally: false (KUBERNETES_NAMESPACE), an annotated
//     Deployment outside Reloader's namespace does not roll;
//   - the admission policy of deploy/reloader refuses Reloader's token
//     every Secret, ConfigMap and Lease of Reloader's namespace that is not
//     watcher's (imageSwapPolicy);
//   - watcher was refused nothing.
//
// Reloader's port (9090) is fixed, so the value sets run one after the
// other, each process stopped (SIGTERM) before the next starts.
func TestReloaderDeployment(t *testing.T) {
	namespace(t, reloaderNamespace, nil)
	for _, tc := range []struct {
		set         string
		namespaced  bool // watchGlobally: false: Reloader's namespace alone is watched
		byNamespace bool // enableMetricsByNamespace
	}{
		{set: fixture.ReloaderDefault},
		{set: fixture.ReloaderNamespaced, namespaced: true},
		{set: fixture.ReloaderHA},
		{set: fixture.ReloaderMetricsByNamespace, byNamespace: true},
	} {
		t.Run(tc.set, func(t *testing.T) {
			g := NewWithT(t)
			rc, err := fixture.ReloaderRender(tc.set)
			g.Expect(err).NotTo(HaveOccurred())
			d, c := rc.Deployment, rc.Container()
			g.Expect(d.Namespace).To(Equal(reloaderNamespace))

			// watcher's own state, left by no earlier sub-test.
			lease := &coordinationv1.Lease{}
			lease.Namespace, lease.Name = reloaderNamespace, "watcher"
			key := &corev1.Secret{}
			key.Namespace, key.Name = reloaderNamespace, "watcher-hash-key"
			settings := &corev1.ConfigMap{}
			settings.Namespace, settings.Name = reloaderNamespace, "watcher-settings"
			own := []client.Object{lease, key, settings}
			for _, o := range own {
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(o), o)).NotTo(Succeed(), "%T %s left by an earlier test", o, o.GetName())
			}
			t.Cleanup(func() {
				for _, o := range own {
					_ = k8s.Delete(ctx, o)
				}
			})

			createAll(t, rc.Objects)
			sa := d.Spec.Template.Spec.ServiceAccountName
			createAll(t, decode(t, []byte(reloaderrbac.RBAC(d.Namespace, sa, tc.namespaced)))) // deploy/reloader/rbac*.yaml
			kubeconfig := tokenKubeconfig(t, reloaderNamespace, sa)

			apps := reloaderNamespace
			if !tc.namespaced {
				apps = namespace(t, "rl-"+tc.set, nil)
			}
			auto := newReloaderApp(t, apps, "auto", true)
			plain := newReloaderApp(t, apps, "plain", false)
			var outside *reloaderApp
			if tc.namespaced {
				outside = newReloaderApp(t, namespace(t, "rl-outside", nil), "auto", true)
			}

			live, ready := probeURL(t, *c, c.LivenessProbe), probeURL(t, *c, c.ReadinessProbe)
			g.Expect(c.LivenessProbe.HTTPGet.Path).To(Equal("/live"))
			g.Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/metrics"))
			waitPortFree(t, ":9090")
			p := reloaderPod(t, watcherBin, d, d.Name+"-6c9f8d7b5d-x7k2p", kubeconfig)
			waitProbes(t, p, live, ready)

			for _, o := range own {
				g.Eventually(func() error { return k8s.Get(ctx, client.ObjectKeyFromObject(o), o) }, wait, 100*time.Millisecond).
					Should(Succeed(), "%T %s in Reloader's namespace", o, o.GetName())
			}

			auto.waitAdopted(t)
			auto.change(t, "2")
			if outside != nil {
				outside.change(t, "2")
			}
			auto.waitRollouts(t, 1)
			plain.stayRollouts(t, 0, 3*time.Second)
			if outside != nil {
				outside.stayRollouts(t, 0, time.Second)
			}

			g.Eventually(func() float64 {
				v, _ := counterValue(t, ready, "reloader_reload_executed_total", map[string]string{"success": "true"})
				return v
			}, wait, 100*time.Millisecond).Should(Equal(1.0), "reloader_reload_executed_total{success=\"true\"} on %s", ready)
			v, ok := counterValue(t, ready, "reloader_reload_executed_total", map[string]string{"success": "false"})
			g.Expect(ok).To(BeTrue(), "reloader_reload_executed_total{success=\"false\"} is served, as Reloader serves it")
			g.Expect(v).To(Equal(0.0))
			v, ok = counterValue(t, ready, "reloader_reload_executed_total_by_namespace", map[string]string{"success": "true", "namespace": apps})
			g.Expect(ok).To(Equal(tc.byNamespace), "reloader_reload_executed_total_by_namespace served")
			if tc.byNamespace {
				g.Expect(v).To(Equal(1.0))
			}
			imageSwapPolicy(t, reloaderNamespace, sa)
			noForbidden(t, p)
		})
	}
}

// reloaderApp is a user's workload for Reloader: a Deployment reading every
// key of its ConfigMap cfg, optionally annotated
// reloader.stakater.com/auto: "true".
type reloaderApp struct{ app }

// newReloaderApp creates ConfigMap cfg and Deployment name in ns, tracks
// the Deployment's rollouts, and deletes both when the test ends.
func newReloaderApp(t *testing.T, ns, name string, auto bool) *reloaderApp {
	t.Helper()
	cm := fixture.ConfigMap(ns, name+"-cfg", map[string]string{"a": "1"})
	dep := fixture.Deployment(ns, name, fixture.EnvFrom(cm.Name, ""))
	if auto {
		dep.Annotations = map[string]string{"reloader.stakater.com/auto": "true"}
	}
	a := &reloaderApp{app{cm: cm, dep: dep}}
	if err := k8s.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithCancel(ctx)
	t.Cleanup(func() {
		cancel()
		_ = k8s.Delete(ctx, dep)
		_ = k8s.Delete(ctx, cm)
	})
	var err error
	if a.tr, err = observe.Track(c, kube.RESTConfig(), dep); err != nil {
		t.Fatal(err)
	}
	return a
}

// createAll creates objs and deletes them when the test ends.
func createAll(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		o := o.DeepCopy()
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		t.Cleanup(func() { _ = k8s.Delete(ctx, o) })
	}
}
