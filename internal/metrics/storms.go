package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The metrics of the restart guards (see package guard).
var (
	// RestartsHeld is the number of restarts held now, by reason (budget,
	// flapping, wave, failed-rollout, window).
	RestartsHeld = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "watcher_restarts_held",
		Help: "Restarts held now, by reason (budget, flapping, wave, failed-rollout, window).",
	}, []string{"reason"})

	// HeldRestarts counts holds, once per hold, by reason.
	HeldRestarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "watcher_held_restarts_total",
		Help: "Restarts that were held, once per hold, by reason.",
	}, []string{"reason"})

	// RolloutsInProgress is the number of rollouts watcher started that are
	// not done.
	RolloutsInProgress = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "watcher_rollouts_in_progress",
		Help: "Rollouts started by watcher that are not done.",
	})

	// RolloutDuration observes, by workload kind, the time from a restart
	// patch to its rollout being done.
	RolloutDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "watcher_rollout_duration_seconds",
		Help:    "Time from a restart patch to the rollout being done, by workload kind.",
		Buckets: []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 3600},
	}, []string{"kind"})

	// FailedRollouts counts rollouts not done within --rollout-timeout.
	FailedRollouts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "watcher_failed_rollouts_total",
		Help: "Rollouts not done within --rollout-timeout, by workload kind.",
	}, []string{"kind"})

	// FlappingSources is the number of ConfigMaps and Secrets flapping now.
	FlappingSources = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "watcher_flapping_sources",
		Help: "ConfigMaps and Secrets flapping now (their names are in Events and logs).",
	})

	// WaveWait observes how long each restart admitted by the wave waited
	// for its slot.
	WaveWait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "watcher_wave_wait_seconds",
		Help:    "Time a restart waited for a rollout slot of the wave before it started.",
		Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200},
	})

	// ReactionSeconds observes the time from a data change seen by the
	// informer to the restart patch it causes.
	ReactionSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "watcher_reaction_seconds",
		Help:    "Time from a data change seen by the informer to its restart patch.",
		Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600},
	})

	// RolloutsPerChange observes, at each restart, how many restarts its
	// workload had within the settle's maximum, itself included: 1 when a
	// change rolls out once, more when it rolled in parts.
	RolloutsPerChange = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "watcher_rollouts_per_change",
		Help:    "At each restart, the restarts of its workload within the settle's maximum, itself included (target: 1).",
		Buckets: []float64{1, 2, 3, 5, 10},
	})
)

func init() {
	ctrlmetrics.Registry.MustRegister(RestartsHeld, HeldRestarts, RolloutsInProgress, RolloutDuration, FailedRollouts, FlappingSources, ReactionSeconds, WaveWait, RolloutsPerChange)
}
