package integration

import (
	"bytes"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/watcher-dev/watcher/internal/cli"
	"github.com/watcher-dev/watcher/internal/explain"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/settings"
)

// TestExplainReadsPublishedSettings: a watcher running with a workload
// selector publishes its settings; explain, given none of the
// installation's flags, reports what that watcher does (the workload is
// not watched), and a flag given overrides the published setting. Without
// the published settings explain says so and uses its flags.
func TestExplainReadsPublishedSettings(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	cm := configMap(ns, "app-config", map[string]string{"a": "1"})
	web := deployment(ns, "web", envFrom("app-config", ""))
	create(t, cm, web)
	startWatcher(t, ns, func(o *options.Options) { o.Namespace = ns; o.WorkloadSelector = "team=other" })
	name := types.NamespacedName{Namespace: ns, Name: settings.ConfigMapName("watcher")}
	g.Eventually(func() error { return k8s.Get(ctx, name, &corev1.ConfigMap{}) }, wait).Should(Succeed())

	kubeconfig := writeKubeconfig(t)
	explainWeb := func(args ...string) (explain.WorkloadReport, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		all := append([]string{"watcher", "explain", "deployment/web", "-o", "json", "-n", ns, "--kubeconfig", kubeconfig}, args...)
		g.Expect(cli.Main(ctx, all, &out, &errOut)).To(Equal(0), errOut.String())
		var rep explain.WorkloadReport
		g.Expect(json.Unmarshal(out.Bytes(), &rep)).To(Succeed())
		return rep, errOut.String()
	}
	rep, warn := explainWeb("--watcher-namespace", ns)
	g.Expect(warn).To(BeEmpty())
	g.Expect(rep.Watched).To(BeFalse(), "the workload selector, read from the published settings: %+v", rep)
	g.Expect(rep.Excluded).To(ContainSubstring("--workload-selector"))

	rep, _ = explainWeb("--watcher-namespace", ns, "--workload-selector", "")
	g.Expect(rep.Watched).To(BeTrue(), "--workload-selector overrides the published settings: %+v", rep)

	rep, warn = explainWeb("--watcher-namespace", ns, "--watcher-name", "other")
	g.Expect(warn).To(ContainSubstring("cannot be read"))
	g.Expect(rep.Watched).To(BeTrue(), "no published settings: the default discovery: %+v", rep)
}

// TestExplainReadsRenamedKeys: with Reloader's --auto-annotation (watcher's
// --annotation-keys), explain reads the installation's key as the
// controller does, from the published settings: a workload opted in by
// the renamed key counts its references, one with Reloader's own key does
// not.
func TestExplainReadsRenamedKeys(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	cm := configMap(ns, "app-config", map[string]string{"a": "1"})
	own := deployment(ns, "own", envFrom("app-config", ""))
	own.Annotations = map[string]string{"example.com/auto": "true"}
	former := deployment(ns, "former", envFrom("app-config", ""))
	former.Annotations = map[string]string{optin.ReloaderAuto: "true"}
	create(t, cm, own, former)
	startWatcher(t, ns, func(o *options.Options) {
		o.Namespace, o.Discovery = ns, "annotated"
		o.AnnotationKeys = optin.Keys{optin.ReloaderAuto: "example.com/auto"}
	})
	name := types.NamespacedName{Namespace: ns, Name: settings.ConfigMapName("watcher")}
	g.Eventually(func() error { return k8s.Get(ctx, name, &corev1.ConfigMap{}) }, wait).Should(Succeed())
	waitAdopted(t, own)

	kubeconfig := writeKubeconfig(t)
	verdict := func(workload string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		args := []string{"watcher", "explain", "deployment/" + workload, "-o", "json", "-n", ns, "--kubeconfig", kubeconfig, "--watcher-namespace", ns}
		g.Expect(cli.Main(ctx, args, &out, &errOut)).To(Equal(0), errOut.String())
		var rep explain.WorkloadReport
		g.Expect(json.Unmarshal(out.Bytes(), &rep)).To(Succeed())
		g.Expect(rep.Uses).To(HaveLen(1), "%+v", rep)
		return rep.Uses[0].Verdict
	}
	g.Expect(verdict("own")).To(Equal("count"), "opted in by the renamed key")
	g.Expect(verdict("former")).NotTo(Equal("count"), "Reloader's own key is no longer read")
}
