// Package metrics defines watcher's Prometheus metrics. They are registered
// with controller-runtime's registry, so they are served on /metrics next to
// the controller-runtime and client-go ones.
//
// Names start with watcher_, counters end in _total, and no label ever holds
// an object's name or anything read from a Secret.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// ConfigChanges counts data changes detected, by kind (ConfigMap, Secret).
	ConfigChanges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "watcher_config_changes_total",
		Help: "Data changes detected in ConfigMaps and Secrets, by kind.",
	}, []string{"kind"})

	// Restarts counts workload restarts, by workload kind.
	Restarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "watcher_restarts_total",
		Help: "Workloads restarted because a ConfigMap or Secret they use changed, by workload kind.",
	}, []string{"kind"})

	// Adoptions counts workloads seen for the first time and recorded
	// without a restart.
	Adoptions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "watcher_adoptions_total",
		Help: "Workloads seen for the first time whose configuration hashes were recorded without a restart, by workload kind.",
	}, []string{"kind"})

	// Skipped counts changes that restarted nothing, by reason (see
	// plan.Skip*).
	Skipped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "watcher_skipped_changes_total",
		Help: "Changes that restarted nothing, by reason.",
	}, []string{"reason"})

	// Errors counts failed operations, by operation.
	Errors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "watcher_errors_total",
		Help: "Errors, by operation.",
	}, []string{"operation"})

	// LockAcquisitions counts attempts to take the lock of a change, by
	// outcome: acquired, held (another replica has it: contention), done
	// (another replica processed it) or error (the lock backend failed).
	LockAcquisitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "watcher_lock_acquisitions_total",
		Help: "Attempts to take the lock of a change, by outcome (acquired, held, done, error).",
	}, []string{"outcome"})

	// LockBackendUp is 1 while the lock backend answers, 0 while it does not.
	LockBackendUp = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "watcher_lock_backend_up",
		Help: "1 while the lock backend (Redis in the redis mode) answers, else 0.",
	})

	// Leader is 1 while this replica processes changes: the leader in the
	// lease mode, always in the redis and none modes.
	Leader = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "watcher_leader",
		Help: "1 while this replica processes changes (the leader, in the lease mode), else 0.",
	})

	// NamespaceSelections counts the namespaces that came to match
	// --namespace-selector while watcher ran (change "selected") and those
	// that no longer match (change "dropped").
	NamespaceSelections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "watcher_namespace_selection_changes_total",
		Help: "Namespaces that came to match the namespace selector (selected) or stopped matching it (dropped) while watcher ran.",
	}, []string{"change"})

	// Watched is the number of objects in watcher's caches, by kind.
	Watched = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "watcher_watched_objects",
		Help: "Objects in watcher's caches, by kind.",
	}, []string{"kind"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(ConfigChanges, Restarts, Adoptions, Skipped, Errors, LockAcquisitions, LockBackendUp, Leader, Watched, NamespaceSelections)
}

// The metrics of SealedSecrets and alerts, registered apart from the
// others above.
var (
	// SealedSecretChanges counts the SealedSecret changes reported, by
	// event: created, updated or deleted.
	SealedSecretChanges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "watcher_sealedsecret_changes_total",
		Help: "SealedSecret changes reported, by event (created, updated, deleted).",
	}, []string{"event"})

	// Alerts counts alerts, by sink and result: sent, failed (every
	// attempt failed), rate-limited (its namespace sent too many) or
	// dropped (the queue was full).
	Alerts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "watcher_alerts_total",
		Help: "Alerts, by sink and result (sent, failed, rate-limited, dropped).",
	}, []string{"sink", "result"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(SealedSecretChanges, Alerts)
}
