package integration

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watcher-dev/watcher/internal/cli"
	"github.com/watcher-dev/watcher/internal/explain"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/plan"
)

// TestNamespaceSelector: with --namespace-selector team=on, a Deployment of a labelled namespace restarts
// when its ConfigMap changes, one of an unlabelled namespace is neither
// adopted nor restarted. Labelling the second namespace while watcher runs
// adopts its Deployment and restarts nothing; a change there then restarts
// it. Removing the label drops the namespace: a change restarts nothing.
// Labelled again, the Deployment, whose record is stale from that change,
// has its record refreshed and is not restarted by the labelling itself.
// watcher explain says whether the namespace is selected.
func TestNamespaceSelector(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	on := namespace(t)
	setLabel := func(name, value string) {
		t.Helper()
		edit(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, func(ns *corev1.Namespace) {
			if value == "" {
				delete(ns.Labels, "team")
				return
			}
			if ns.Labels == nil {
				ns.Labels = map[string]string{}
			}
			ns.Labels["team"] = value
		})
	}
	setLabel(on, "on")
	off := on + "-off"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: off}})

	cmOn, cmOff := configMap(on, "cfg", map[string]string{"a": "1"}), configMap(off, "cfg", map[string]string{"a": "1"})
	create(t, cmOn, cmOff)
	depOn, depOff := deployment(on, "web", envFrom("cfg", "")), deployment(off, "web", envFrom("cfg", ""))
	trOn, trOff := track(t, depOn), track(t, depOff)
	selections := func(change string) func() float64 {
		return func() float64 { return testutil.ToFloat64(metrics.NamespaceSelections.WithLabelValues(change)) }
	}
	startWatcher(t, on, func(o *options.Options) {
		o.Namespaces = []string{on, off}
		o.NamespaceSelector = "team=on"
	})
	waitAdopted(t, depOn)

	// Only the selected namespace is handled.
	setConfigMap(t, cmOn, "a", "2")
	setConfigMap(t, cmOff, "a", "2")
	waitRollouts(t, trOn, 1)
	stayRollouts(t, trOff, 0)
	g.Expect(fetch(t, depOff).Annotations).NotTo(HaveKey(plan.RecordAnnotation), "a workload of a namespace not selected is not adopted")

	// Labelled: adopted, nothing restarted; then its changes count.
	selected := selections("selected")()
	setLabel(off, "on")
	g.Eventually(selections("selected"), wait, 10*time.Millisecond).Should(BeNumerically(">", selected))
	waitAdopted(t, depOff)
	stayRollouts(t, trOff, 0)
	setConfigMap(t, cmOff, "a", "3")
	waitRollouts(t, trOff, 1)

	// Unlabelled: dropped, its changes restart nothing.
	dropped := selections("dropped")()
	setLabel(off, "")
	g.Eventually(selections("dropped"), wait, 10*time.Millisecond).Should(BeNumerically(">", dropped))
	stale := fetch(t, depOff).Annotations[plan.RecordAnnotation]
	setConfigMap(t, cmOff, "a", "4")
	stayRollouts(t, trOff, 1)
	g.Expect(fetch(t, depOff).Annotations[plan.RecordAnnotation]).To(Equal(stale), "a dropped namespace's workload is not written")

	// Labelled again: the stale record is refreshed, and the labelling
	// restarts nothing.
	setLabel(off, "on")
	g.Eventually(func() string { return fetch(t, depOff).Annotations[plan.RecordAnnotation] }, wait, 10*time.Millisecond).
		ShouldNot(Equal(stale), "the record is brought up to date")
	stayRollouts(t, trOff, 1)
	setConfigMap(t, cmOff, "a", "5")
	waitRollouts(t, trOff, 2)
	stayRollouts(t, trOn, 1)

	// watcher explain reads the namespace's labels for the selector.
	kubeconfig := writeKubeconfig(t)
	explained := func(selector string) explain.WorkloadReport {
		var out, errOut bytes.Buffer
		code := cli.Main(ctx, []string{"watcher", "explain", "deployment/web", "-n", off, "--kubeconfig", kubeconfig,
			"--watcher-namespace", off, "--namespace-selector", selector, "-o", "json"}, &out, &errOut)
		g.Expect(code).To(Equal(0), errOut.String())
		var rep explain.WorkloadReport
		g.Expect(json.Unmarshal(out.Bytes(), &rep)).To(Succeed())
		return rep
	}
	g.Expect(explained("team:on").Excluded).To(BeEmpty())
	g.Expect(explained("team=other").Excluded).To(ContainSubstring("--namespace-selector"))
}
