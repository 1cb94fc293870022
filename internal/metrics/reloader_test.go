package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/watcher-dev/watcher/internal/metrics"
)

// TestRestart checks that each outcome of a restart patch is counted in
// watcher_restarts_total and Reloader's counters as the table of package
// metrics says, and that the by-namespace series appear on the registry
// that /metrics serves only once CountByNamespace was called.
func TestRestart(t *testing.T) {
	type counts struct{ restarts, success, failure, nsSuccess, nsFailure float64 }
	read := func() counts {
		return counts{
			restarts:  testutil.ToFloat64(metrics.Restarts.WithLabelValues("StatefulSet")),
			success:   testutil.ToFloat64(metrics.ReloadExecuted.WithLabelValues("true")),
			failure:   testutil.ToFloat64(metrics.ReloadExecuted.WithLabelValues("false")),
			nsSuccess: testutil.ToFloat64(metrics.ReloadExecutedByNamespace.WithLabelValues("true", "apps")),
			nsFailure: testutil.ToFloat64(metrics.ReloadExecutedByNamespace.WithLabelValues("false", "apps")),
		}
	}
	// series returns the number of series of name on the registry that
	// /metrics serves.
	series := func(name string) int {
		families, err := ctrlmetrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == name {
				return len(f.GetMetric())
			}
		}
		return 0
	}
	// As Reloader's, both series of the total are there from the start.
	if n := series("reloader_reload_executed_total"); n != 2 {
		t.Fatalf("reloader_reload_executed_total has %d series before any restart, want 2 (success true and false)", n)
	}
	metrics.ReloadExecutedByNamespace.WithLabelValues("true", "apps") // a series that would be served
	if series("reloader_reload_executed_total_by_namespace") != 0 {
		t.Fatal("the by-namespace counter is registered without CountByNamespace")
	}
	for _, tc := range []struct {
		name        string
		byNamespace bool
		outcome     metrics.Outcome
		want        counts // the increase
	}{
		{name: "restarted", outcome: metrics.Restarted, want: counts{restarts: 1, success: 1}},
		{name: "patched, pods roll when deleted", outcome: metrics.PatchedOnDelete, want: counts{success: 1}},
		{name: "failed", outcome: metrics.RestartFailed, want: counts{failure: 1}},
		{name: "restarted, by namespace", byNamespace: true, outcome: metrics.Restarted, want: counts{restarts: 1, success: 1, nsSuccess: 1}},
		{name: "failed, by namespace", byNamespace: true, outcome: metrics.RestartFailed, want: counts{failure: 1, nsFailure: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.byNamespace {
				metrics.CountByNamespace()
				metrics.CountByNamespace() // a second call does nothing (no panic)
			}
			before := read()
			metrics.Restart("StatefulSet", "apps", tc.outcome)
			after := read()
			got := counts{
				restarts: after.restarts - before.restarts, success: after.success - before.success, failure: after.failure - before.failure,
				nsSuccess: after.nsSuccess - before.nsSuccess, nsFailure: after.nsFailure - before.nsFailure,
			}
			if got != tc.want {
				t.Errorf("increase = %+v, want %+v", got, tc.want)
			}
		})
	}
	if series("reloader_reload_executed_total_by_namespace") == 0 {
		t.Error("the by-namespace counter is not served after CountByNamespace")
	}
}
