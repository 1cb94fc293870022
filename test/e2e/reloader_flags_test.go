package e2e

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/cause"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/settings"
	"github.com/watcher-dev/watcher/test/fixture"
)

// TestReloaderArguments (issue 19, item 1): the built binary started with
// the arguments of Reloader's chart at its defaults (and the chart's
// RELOADER_NAMESPACE) behaves as Reloader: only workloads that opt in are
// restarted. With the arguments of Reloader's README examples it starts
// with their meaning, as its published settings show; a flag it cannot
// honour yet stops it with a message naming the flag.
func TestReloaderArguments(t *testing.T) {
	published := func(g Gomega, ns string) settings.Settings {
		var cm corev1.ConfigMap
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: settings.ConfigMapName("watcher")}, &cm)).To(Succeed())
		var s settings.Settings
		g.Expect(json.Unmarshal([]byte(cm.Data[settings.DataKey]), &s)).To(Succeed())
		return s
	}

	t.Run("chart defaults", func(t *testing.T) {
		g := NewWithT(t)
		ns := namespace(t)
		cm := fixture.ConfigMap(ns, "cfg", map[string]string{"k": "0"})
		create(t, cm)
		plain := fixture.Deployment(ns, "plain", fixture.EnvFrom("cfg", ""))
		auto := fixture.Deployment(ns, "auto", fixture.EnvFrom("cfg", ""))
		auto.Annotations = map[string]string{optin.ReloaderAuto: "true"}
		create(t, plain, auto)
		// Reloader's port (9090) is the test's choice here: other tests
		// run beside this one.
		startWatcherEnv(t, "watcher", ns, []string{"RELOADER_NAMESPACE=" + ns}, "--log-level=info", "--reloader-addr="+fixture.FreeAddr(t))
		g.Eventually(func(g Gomega) string { return published(g, ns).Discovery }, wait).Should(Equal("annotated"))
		waitAdopted(t, auto)
		plainRS, autoRS := replicaSets(t, plain), replicaSets(t, auto)
		setData(t, cm, "k", "1")
		g.Eventually(func() int { return replicaSets(t, auto) }, wait).Should(Equal(autoRS+1), "the opted-in workload restarts")
		g.Consistently(func() int { return replicaSets(t, plain) }, quietE2E).Should(Equal(plainRS), "not the others, as with Reloader")
	})

	t.Run("README examples", func(t *testing.T) {
		g := NewWithT(t)
		ns := namespace(t)
		startWatcher(t, "watcher", ns, "--auto-reload-all=true", "--reload-strategy=annotations", "--namespaces-to-ignore=kube-system",
			"--resources-to-ignore=secrets", "--log-format=json", "--enable-ha=true", "--is-Argo-Rollouts=true",
			"--resource-label-selector=reloader:enabled", "--configmap-annotation", optin.ConfigMapReload, "--namespace-selector=team:a,env:*")
		g.Eventually(func(g Gomega) settings.Settings { return published(g, ns) }, wait).Should(And(
			HaveField("Discovery", "all"),
			HaveField("IgnoreSecretNamespaces", ConsistOf("*")),
			HaveField("ConfigSelector", "reloader=enabled"),
			// The harness watches one namespace (--namespaces): as in
			// Reloader's scoped mode, --namespaces-to-ignore and
			// --namespace-selector are set aside (internal/options tests
			// their conversion in the global mode).
			HaveField("IgnoreConfigMapNamespaces", BeEmpty()),
			HaveField("NamespaceSelector", ""),
		))
	})

	t.Run("annotation keys", func(t *testing.T) {
		// Reloader's --auto-annotation and --configmap-annotation: the
		// keys they name are read with Reloader's meaning, on the workload
		// and on its pod template, and Reloader's own keys no longer.
		g := NewWithT(t)
		ns := namespace(t)
		cm := fixture.ConfigMap(ns, "cfg", map[string]string{"k": "0"})
		create(t, cm)
		own := fixture.Deployment(ns, "own", fixture.EnvFrom("cfg", ""))
		own.Annotations = map[string]string{"example.com/auto": "true"}
		listed := fixture.Deployment(ns, "listed", fixture.EnvFrom("cfg", ""))
		listed.Spec.Template.Annotations = map[string]string{"example.com/cm-reload": "cfg"}
		former := fixture.Deployment(ns, "former", fixture.EnvFrom("cfg", ""))
		former.Annotations = map[string]string{optin.ReloaderAuto: "true"}
		create(t, own, listed, former)
		startWatcher(t, "watcher", ns, "--auto-annotation=example.com/auto", "--configmap-annotation", "example.com/cm-reload")
		g.Eventually(func(g Gomega) optin.Keys { return published(g, ns).AnnotationKeys }, wait).Should(Equal(optin.Keys{
			optin.ReloaderAuto: "example.com/auto", optin.ConfigMapReload: "example.com/cm-reload"}))
		waitAdopted(t, own)
		waitAdopted(t, listed)
		ownRS, listedRS, formerRS := replicaSets(t, own), replicaSets(t, listed), replicaSets(t, former)
		setData(t, cm, "k", "1")
		g.Eventually(func() int { return replicaSets(t, own) }, wait).Should(Equal(ownRS+1), "opted in by the renamed auto key")
		g.Eventually(func() int { return replicaSets(t, listed) }, wait).Should(Equal(listedRS+1), "named by the renamed reload key on its template")
		g.Consistently(func() int { return replicaSets(t, former) }, quietE2E).Should(Equal(formerRS), "Reloader's own key is no longer read")
	})

	t.Run("webhook-url", func(t *testing.T) {
		// Reloader's --webhook-url posts each reload to the URL instead of
		// making it: watcher posts the restart it would make and writes
		// nothing to the workload.
		g := NewWithT(t)
		ns := namespace(t)
		box := &inbox{}
		srv := httptest.NewServer(box)
		t.Cleanup(srv.Close)
		cm := fixture.ConfigMap(ns, "cfg", map[string]string{"k": "0"})
		create(t, cm)
		web := fixture.Deployment(ns, "web", fixture.EnvFrom("cfg", ""))
		web.Annotations = map[string]string{optin.ReloaderAuto: "true"}
		create(t, web)
		// Adopted by a watcher that writes, as a dry run records nothing.
		first := startWatcher(t, "watcher", ns)
		waitAdopted(t, web)
		first.Stop()
		startWatcher(t, "watcher", ns, "--webhook-url", srv.URL+"/hook").WaitReady(t)
		g.Eventually(func(g Gomega) bool { return published(g, ns).Discovery == "annotated" }, wait).Should(BeTrue())
		waitRunning(t, web)
		rs := replicaSets(t, web)
		setData(t, cm, "k", "1")
		g.Eventually(func() []string { return box.events() }, wait, 50*time.Millisecond).Should(ConsistOf("restart"))
		var a struct {
			DryRun   bool
			Workload struct{ Kind, Namespace, Name string }
			Sources  []struct{ Kind, Name string }
		}
		g.Expect(json.Unmarshal([]byte(box.bodies()[0]), &a)).To(Succeed())
		g.Expect(a.DryRun).To(BeTrue(), "the alert says nothing was written")
		g.Expect(a.Workload.Name).To(Equal("web"))
		g.Expect(a.Sources).To(ContainElement(HaveField("Name", "cfg")))
		g.Expect(events(t, ns, "Deployment", cause.ReasonWouldRestart)).NotTo(BeEmpty(), "the WouldRestart Event")
		g.Consistently(func() int { return replicaSets(t, web) }, quietE2E).Should(Equal(rs), "nothing restarted")
	})

	t.Run("every flag at once", func(t *testing.T) {
		// No flag of Reloader's stops watcher: with all of them it starts,
		// each mapped (--enable-csi-integration is watcher's --csi, see
		// TestCSIRotationRollout).
		g := NewWithT(t)
		ns := namespace(t)
		startWatcher(t, "watcher", ns, "--auto-reload-all=true", "--reload-strategy=env-vars", "--reload-on-create=true", "--reload-on-delete=true",
			"--namespace-selector=team:*", "--namespaces-to-ignore=kube-system", "--resources-to-ignore=configmaps", "--ignored-workload-types=jobs,cronjobs",
			"--resource-label-selector=reloader:enabled", "--log-format=json", "--log-level=debug", "--enable-ha=true", "--is-Argo-Rollouts=true",
			"--sync-after-restart", "--enable-csi-integration", "--enable-pprof", "--pprof-addr=127.0.0.1:0", "--webhook-url=http://127.0.0.1:1/hook",
			"--auto-annotation=example.com/auto", "--configmap-annotation=example.com/cm", "--secret-annotation=example.com/sec",
			"--configmap-auto-annotation=example.com/cm-auto", "--secret-auto-annotation=example.com/sec-auto", "--auto-search-annotation=example.com/search",
			"--search-match-annotation=example.com/match", "--ignore-annotation=example.com/ignore", "--pause-deployment-annotation=example.com/pause",
			"--pause-deployment-time-annotation=example.com/paused-at").WaitReady(t)
		g.Eventually(func(g Gomega) settings.Settings { return published(g, ns) }, wait).Should(And(
			HaveField("Discovery", "all"),
			HaveField("NamespaceSelector", ""), // scoped mode, as above
			HaveField("IgnoreConfigMapNamespaces", ConsistOf("*")),
			HaveField("IgnoreWorkloadKinds", ConsistOf("Job", "CronJob")),
			HaveField("AnnotationKeys", HaveLen(9)),
		))
	})
}
