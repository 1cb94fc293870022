package metrics

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Stakater Reloader's metrics, under Reloader's names, so that the
// dashboards and alerts of a Reloader user keep working once watcher runs
// in Reloader's place. They are counted as Reloader counts them (its
// internal/pkg/handler/upgrade.go), through Restart alone:
//
//	the restart of one workload           reloader_reload_executed_total   ..._by_namespace
//	patch made (watcher_restarts_total)   {success="true"} +1              {success="true",namespace} +1
//	patch made on an OnDelete workload    {success="true"} +1              {success="true",namespace} +1
//	patch failed (not a conflict)         {success="false"} +1             {success="false",namespace} +1
//	dry run (--dry-run, or Reloader's     nothing                          nothing
//	--webhook-url: a POST, no restart)
//
// Reloader updates an OnDelete StatefulSet or DaemonSet like any other
// and counts it; watcher counts it in watcher_skipped_changes_total, not
// in watcher_restarts_total, since no pod is replaced. Reloader counts
// every failed update, a conflict it then retries included, once per
// attempt; watcher does not count a conflict: it reads the workload again
// and decides again, often that the restart is made already (another
// replica, the same change seen through the workload), and an alert on
// failed reloads would fire for nothing. The by-namespace series exist only once CountByNamespace was
// called (Reloader's METRICS_COUNT_BY_NAMESPACE=enabled): one series per
// namespace, which Reloader warns may be many.
var (
	// ReloadExecuted is Reloader's reloader_reload_executed_total{success}.
	ReloadExecuted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "reloader",
		Name:      "reload_executed_total",
		Help:      "Counter of reloads executed by Reloader.",
	}, []string{"success"})

	// ReloadExecutedByNamespace is Reloader's
	// reloader_reload_executed_total_by_namespace{success,namespace},
	// registered by CountByNamespace.
	ReloadExecutedByNamespace = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "reloader",
		Name:      "reload_executed_total_by_namespace",
		Help:      "Counter of reloads executed by Reloader by namespace.",
	}, []string{"success", "namespace"})

	byNamespace     atomic.Bool
	byNamespaceOnce sync.Once
)

func init() {
	// As Reloader, both series are there from the start, at 0.
	ReloadExecuted.WithLabelValues("true")
	ReloadExecuted.WithLabelValues("false")
	ctrlmetrics.Registry.MustRegister(ReloadExecuted)
}

// CountByNamespace registers and, from now on, counts
// reloader_reload_executed_total_by_namespace. It is called once, at
// start; a second call does nothing.
func CountByNamespace() {
	byNamespaceOnce.Do(func() {
		ctrlmetrics.Registry.MustRegister(ReloadExecutedByNamespace)
		byNamespace.Store(true)
	})
}

// Outcome is what became of a restart patch.
type Outcome int

const (
	// Restarted: the patch was made and the workload's pods are replaced.
	Restarted Outcome = iota
	// PatchedOnDelete: the patch was made, but the workload's pods roll
	// only when deleted (updateStrategy OnDelete).
	PatchedOnDelete
	// RestartFailed: the patch failed.
	RestartFailed
)

// Restart counts the restart patch of a workload of kind in namespace by
// its outcome: watcher_restarts_total for a restart made, and Reloader's
// counters as the table above says. It is the one place restarts are
// counted.
func Restart(kind, namespace string, o Outcome) {
	if o == Restarted {
		Restarts.WithLabelValues(kind).Inc()
	}
	success := strconv.FormatBool(o != RestartFailed)
	ReloadExecuted.WithLabelValues(success).Inc()
	if byNamespace.Load() {
		ReloadExecutedByNamespace.WithLabelValues(success, namespace).Inc()
	}
}
