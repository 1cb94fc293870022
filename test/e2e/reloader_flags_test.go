package e2e

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
		startWatcherEnv(t, "watcher", ns, []string{"RELOADER_NAMESPACE=" + ns}, "--log-level=info")
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
			HaveField("IgnoreConfigMapNamespaces", ContainElement("kube-system")),
			HaveField("ConfigSelector", "reloader=enabled"),
			HaveField("NamespaceSelector", "team=a,env"),
		))
	})

	t.Run("refused", func(t *testing.T) {
		code, out := runWatcher(t, nil, "--enable-csi-integration", "--lease-namespace=default")
		NewWithT(t).Expect(code).To(Equal(2), out)
		NewWithT(t).Expect(out).To(ContainSubstring("--enable-csi-integration"))
	})
}
