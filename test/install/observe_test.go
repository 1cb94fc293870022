package install

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// metrics are the metric names the rules and the dashboard may use:
// watcher's (those exported today and those agreed for the features under
// way), Prometheus's up, and kube-state-metrics' for the Deployment.
var metrics = map[string]bool{
	"watcher_config_changes_total": true, "watcher_restarts_total": true, "watcher_adoptions_total": true,
	"watcher_skipped_changes_total": true, "watcher_errors_total": true, "watcher_lock_acquisitions_total": true,
	"watcher_lock_backend_up": true, "watcher_leader": true, "watcher_watched_objects": true,
	"watcher_restarts_held": true, "watcher_held_restarts_total": true, "watcher_rollouts_in_progress": true,
	"watcher_rollout_duration_seconds_bucket": true, "watcher_failed_rollouts_total": true,
	"watcher_flapping_sources": true, "watcher_reaction_seconds_bucket": true, "watcher_would_restart_total": true,
	"watcher_alerts_total": true, "watcher_sealedsecret_changes_total": true,
	"up": true, "kube_deployment_status_replicas_ready": true, "kube_deployment_spec_replicas": true,
}

// TestRulesAndDashboard checks the chart's PrometheusRule and Grafana
// dashboard as Prometheus would load them (hack/tools/promcheck: rulefmt
// and the PromQL parser): every rule and every panel's expression parses,
// every alert has a summary and a severity, the alerts operators expect are
// there, and every metric named is one watcher exports (or one of up and
// kube-state-metrics'). A broken rule fails the check.
func TestRulesAndDashboard(t *testing.T) {
	g := NewWithT(t)
	promcheck := buildPromcheck(t)
	objs := render(t, "watcher", "watcher", "-f", filepath.Join(chart, "examples", "monitoring.yaml"))
	rule := find(objs, "PrometheusRule", "watcher")
	g.Expect(rule).To(HaveLen(1))
	spec, _, _ := unstructured.NestedMap(rule[0].Object, "spec")
	rules := writeYAML(t, "rules.yaml", spec)
	cm := find(objs, "ConfigMap", "watcher-dashboard")
	g.Expect(cm).To(HaveLen(1))
	dashboard, _, _ := unstructured.NestedString(cm[0].Object, "data", "watcher.json")
	shipped, err := os.ReadFile(filepath.Join(chart, "dashboards", "watcher.json"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(dashboard).To(Equal(strings.TrimSuffix(string(shipped), "\n")), "the ConfigMap holds the dashboard")
	dash := filepath.Join(t.TempDir(), "dashboard.json")
	g.Expect(os.WriteFile(dash, []byte(dashboard), 0o644)).To(Succeed())

	out, err := exec.Command(promcheck, "-rules", rules, "-dashboard", dash).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "promcheck:\n%s", out)
	names := strings.Fields(string(out))
	for _, n := range names {
		g.Expect(metrics).To(HaveKey(n), "a metric watcher does not export")
	}
	for _, want := range []string{"watcher_restarts_total", "watcher_restarts_held", "watcher_config_changes_total", "watcher_errors_total",
		"watcher_lock_backend_up", "watcher_rollouts_in_progress", "watcher_reaction_seconds_bucket", "watcher_failed_rollouts_total"} {
		g.Expect(names).To(ContainElement(want))
	}
	var alerts []string
	exprs := map[string]string{}
	groups, _, _ := unstructured.NestedSlice(spec, "groups")
	for _, gr := range groups {
		rs, _, _ := unstructured.NestedSlice(gr.(map[string]any), "rules")
		for _, r := range rs {
			name := r.(map[string]any)["alert"].(string)
			alerts = append(alerts, name)
			exprs[name], _ = r.(map[string]any)["expr"].(string)
		}
	}
	g.Expect(alerts).To(ContainElements("WatcherDown", "WatcherNotReady", "WatcherLockBackendDown", "WatcherErrors", "WatcherRestartsHeld", "WatcherFailedRollouts"))
	// Holds someone asked for are not trouble: a time window, a pause
	// period, a wave waiting for slots may hold restarts for hours.
	g.Expect(exprs["WatcherRestartsHeld"]).To(ContainSubstring(`reason!~"window|pause-period|wave"`), "WatcherRestartsHeld ignores intended holds")

	bad := writeYAML(t, "bad.yaml", map[string]any{"groups": []any{map[string]any{"name": "x", "rules": []any{
		map[string]any{"alert": "Broken", "expr": "rate(watcher_errors_total[5m]", "labels": map[string]any{"severity": "warning"}, "annotations": map[string]any{"summary": "x"}},
	}}}})
	out, err = exec.Command(promcheck, "-rules", bad).CombinedOutput()
	g.Expect(err).To(HaveOccurred(), "promcheck passes a broken rule:\n%s", out)
}

// buildPromcheck builds hack/tools/promcheck (its own module) into a
// temporary folder.
func buildPromcheck(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "promcheck")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join(root, "hack", "tools", "promcheck")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build promcheck: %v\n%s", err, out)
	}
	return bin
}

// writeYAML writes v as YAML (in its JSON form) into a temporary file and
// returns its path.
func writeYAML(t *testing.T, name string, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
