package e2e

import (
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watcher-dev/watcher/internal/cause"
	"github.com/watcher-dev/watcher/test/fixture"
)

// installPolicyCRD creates the CRD of deploy/crds/ and waits until
// ReloadPolicies are served.
func installPolicyCRD(t *testing.T) {
	t.Helper()
	installCRD(t, filepath.Join("..", "..", "deploy", "crds", "watcher.dev_reloadpolicies.yaml"),
		schema.GroupVersionKind{Group: "watcher.dev", Version: "v1alpha1", Kind: "ReloadPolicyList"}, "default")
}

// TestPolicyDryRun: the built binary, with a dry-run ReloadPolicy that
// targets a Deployment whose pod spec does not use the source: a change of
// the source writes nothing to the Deployment (no record, no rollout) and
// is announced once (log, Event WouldRestart, watcher_would_restart_total).
func TestPolicyDryRun(t *testing.T) {
	g := NewWithT(t)
	installPolicyCRD(t)
	ns := namespace(t)
	cm := fixture.ConfigMap(ns, "shared", map[string]string{"LOG_LEVEL": "info"})
	create(t, cm)
	api := fixture.Deployment(ns, "api", fixture.PodSpec(corev1.Container{Name: "app", Image: "app:1"}))
	tr := track(t, api)
	w := startWatcher(t, "watcher", ns)
	w.WaitReady(t)
	p := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "watcher.dev/v1alpha1", "kind": "ReloadPolicy",
		"metadata": map[string]any{"namespace": ns, "name": "api-settings"},
		"spec": map[string]any{
			"sources": []any{map[string]any{"kind": "ConfigMap", "name": "shared"}},
			"targets": []any{map[string]any{"kind": "Deployment", "name": "api"}},
			"dryRun":  true,
		},
	}}
	create(t, p)
	waitLog(t, w, "Dry run: would write the record, restarting nothing", `"workload": "Deployment `+ns+`/api"`)
	before := watcherAnnotations(t, api)

	setData(t, cm, "LOG_LEVEL", "debug")
	waitEvent(t, ns, "api", cause.ReasonWouldRestart, "ConfigMap shared changed (keys: LOG_LEVEL;")
	g.Eventually(func() float64 { return metricValue(t, w, `watcher_would_restart_total{kind="Deployment"}`) }, wait).Should(Equal(1.0))
	g.Consistently(func() float64 { return metricValue(t, w, `watcher_would_restart_total{kind="Deployment"}`) }, time.Second).Should(Equal(1.0))
	g.Expect(wouldRestartNotes(t, ns, "api")).To(ConsistOf(ContainSubstring("Dry run, nothing written: would restart because ConfigMap shared changed (keys: LOG_LEVEL;")))
	g.Expect(watcherAnnotations(t, api)).To(Equal(before), "dry-run wrote to the target")
	g.Expect(before["api"]).To(Equal([2]string{}), "no record")
	g.Expect(tr.Count()).To(Equal(0))
}
