package integration

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/plan"
)

// TestSelectors: workloads and ConfigMaps/Secrets outside the label
// selectors are left alone.
func TestSelectors(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	watched := configMap(ns, "watched", map[string]string{"a": "1"})
	watched.Labels = map[string]string{"watch": "yes"}
	unwatched := configMap(ns, "unwatched", map[string]string{"a": "1"})
	create(t, watched, unwatched)
	in := deployment(ns, "in", envFrom("watched", ""))
	in.Labels = map[string]string{"restart": "yes"}
	inTr := track(t, in)
	outTr := track(t, deployment(ns, "out", envFrom("watched", "")))
	other := deployment(ns, "other", envFrom("unwatched", ""))
	other.Labels = map[string]string{"restart": "yes"}
	otherTr := track(t, other)
	startWatcher(t, ns, func(o *options.Options) {
		o.WorkloadSelector = "restart=yes"
		o.ConfigSelector = "watch=yes"
	})
	waitAdopted(t, in)

	setConfigMap(t, unwatched, "a", "2")
	setConfigMap(t, watched, "a", "2")
	waitRollouts(t, inTr, 1)
	stayRollouts(t, outTr, 0)
	stayRollouts(t, otherTr, 0)
	NewWithT(t).Expect(fetch(t, deployment(ns, "out", corev1.PodSpec{})).Annotations).To(BeEmpty(), "a workload outside the selector is not even adopted")
	NewWithT(t).Expect(fetch(t, other).Annotations).NotTo(HaveKey(plan.RecordAnnotation), "a workload using only excluded objects is never written")
}

// TestPrintTime: every PRINT_TIME watcher logs the ignored namespaces and
// how many objects it watches.
func TestPrintTime(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	create(t, configMap(ns, "a", nil), configMap(ns, "b", nil), secret(ns, "s", nil), deployment(ns, "web", envFrom("a", "")))
	w := startWatcher(t, ns, func(o *options.Options) {
		o.PrintInterval = time.Second
		o.IgnoreSecretNamespaces = []string{"kube-system"}
	})
	waitLog(t, w, `"msg"="Watching"`, `"ignoredSecretNamespaces"=["kube-system"]`, `"configMaps"=2`, `"secrets"=1`, `"deployments"=1`, `"statefulSets"=0`)
	NewWithT(t).Eventually(func() int { return len(w.logs.Lines(`"msg"="Watching"`)) }, 5*time.Second).Should(BeNumerically(">=", 2))
}

// TestMetrics: restarts, detected changes and skipped changes are counted.
// The registry is shared by the tests running in parallel, hence the
// comparisons with earlier values; the per-process gauges (leader, lock
// backend) are checked by the e2e tests, one process each.
func TestMetrics(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	dep := track(t, deployment(ns, "web", envFrom("cfg", "")))
	startWatcher(t, ns)
	waitAdopted(t, deployment(ns, "web", corev1.PodSpec{}))

	restarts := testutil.ToFloat64(metrics.Restarts.WithLabelValues("Deployment"))
	changes := testutil.ToFloat64(metrics.ConfigChanges.WithLabelValues("ConfigMap"))
	metadataOnly := testutil.ToFloat64(metrics.Skipped.WithLabelValues("metadata-only"))
	setConfigMap(t, cm, "a", "2")
	waitRollouts(t, dep, 1)
	edit(t, cm, func(cm *corev1.ConfigMap) { cm.Labels = map[string]string{"x": "y"} })
	g := NewWithT(t)
	g.Eventually(func() float64 { return testutil.ToFloat64(metrics.Skipped.WithLabelValues("metadata-only")) }, wait).Should(BeNumerically(">", metadataOnly))
	g.Expect(testutil.ToFloat64(metrics.Restarts.WithLabelValues("Deployment"))).To(BeNumerically(">", restarts))
	g.Expect(testutil.ToFloat64(metrics.ConfigChanges.WithLabelValues("ConfigMap"))).To(BeNumerically(">", changes))
}
