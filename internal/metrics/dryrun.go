package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// WouldRestart counts, in dry-run mode, the restarts watcher would have
// made, by workload kind: once per workload and configuration.
var WouldRestart = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "watcher_would_restart_total",
	Help: "Restarts watcher would have made in dry-run mode (--dry-run), by workload kind.",
}, []string{"kind"})

func init() { ctrlmetrics.Registry.MustRegister(WouldRestart) }
