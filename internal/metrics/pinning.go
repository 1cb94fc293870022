package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The metrics of pinned config revisions (see package pin).
var (
	// PinningAvailable is 1 while pinning is installed (--pinning and its
	// admission policy), 0 while it is asked for but off.
	PinningAvailable = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "watcher_pinning_available",
		Help: "1 while pinned config revisions work (--pinning and its admission policy installed), 0 while asked for but off.",
	})

	// PinnedRestarts counts restarts by outcome: pinned (every source it
	// pins pinned), partial (some left live: a name taken, the budget
	// spent) or unpinned (pinning off).
	PinnedRestarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "watcher_pinned_restarts_total",
		Help: "Restarts of workloads that pin their config, by outcome: pinned, partial (some sources left live) or unpinned (pinning off).",
	}, []string{"outcome"})

	// Snapshots counts the snapshots made, by kind (ConfigMap, Secret),
	// and their bytes.
	Snapshots = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "watcher_snapshots_total",
		Help: "Snapshots of ConfigMaps and Secrets used by pinned restarts, by kind and whether made or reused.",
	}, []string{"kind", "how"})

	// UnpinnedPods counts the pods of pinned revisions that came up
	// unpinned (the admission policy did not run for them).
	UnpinnedPods = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "watcher_unpinned_pods_total",
		Help: "Pods of pinned revisions that came up unpinned, reading the live ConfigMaps and Secrets (the admission policy did not run for them).",
	})

	// StaleWorkloads is, per namespace, the workloads whose pods run
	// configuration older than the current one, as watcher last decided:
	// a restart due but not made (held, dry run, a rollback's content not
	// rolled forward to). watcher stale lists them.
	StaleWorkloads = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "watcher_stale_workloads",
		Help: "Workloads whose pods run configuration older than the current one (a restart due but not made: held, dry run, rolled back), by namespace.",
	}, []string{"namespace"})

	// Rollbacks counts the native rollbacks of pinned workloads seen, by
	// workload kind.
	Rollbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "watcher_rollbacks_total",
		Help: "Native rollbacks (kubectl rollout undo) of workloads that pin their config, by workload kind.",
	}, []string{"kind"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(PinningAvailable, PinnedRestarts, Snapshots, Rollbacks, UnpinnedPods, StaleWorkloads)
}
