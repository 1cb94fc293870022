// Package options holds watcher's settings. Every setting is a command-line
// flag with an environment-variable equivalent; a flag given on the command
// line wins over the environment, which wins over the default.
//
// The environment variable names and defaults of the original design
// (REDIS_HOST, LOCK_EXPIRATION_TIME, IGNORE_SECRET_NAMESPACES, PRINT_TIME...)
// work exactly as existing deployments set them.
package options

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/watcher-dev/watcher/internal/alert"
	"github.com/watcher-dev/watcher/internal/envflag"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/settings"
)

// Options are watcher's settings.
type Options struct {
	// Kubeconfig is an explicit kubeconfig path (--kubeconfig).
	Kubeconfig string
	// LocalConfig: true uses a kubeconfig, false the in-cluster config, nil
	// tries a kubeconfig first and falls back to the in-cluster config.
	LocalConfig *bool

	// Settings are the settings that change what watcher decides (the
	// namespaces, selectors and kinds watched, the annotations, the
	// discovery mode, reload-on-create and -delete, the hash key Secret,
	// CSI): they bind their own flags, and the controller publishes them
	// for the commands (package settings).
	settings.Settings
	// Coalesce is how long a changed object must stay quiet before its
	// users are handled, so that a burst of changes restarts them once;
	// CoalesceMax bounds the wait under a never-ending stream of changes.
	Coalesce    time.Duration
	CoalesceMax time.Duration
	// Settle is how long every changed source of a workload must have been
	// quiet before it restarts (0: Coalesce), and SettleMax the longest
	// it waits from the first change (package guard's Settles).
	Settle, SettleMax time.Duration
	// CronJobTrigger also runs a restarted CronJob at once: a Job is created
	// from its new template, as kubectl create job --from=cronjob/NAME does.
	CronJobTrigger bool
	// DryRun decides as usual but writes nothing to workloads: what would
	// be done is logged, emitted as Events and counted.
	DryRun bool
	// Workers is the number of workloads handled in parallel.
	Workers int
	// RestartStrategy is how a restart is written (see package restart),
	// one of restart.Names(); a workload's annotation
	// watcher.dev/restart-strategy overrides it.
	RestartStrategy string

	// RestartBudget is the most restarts of one workload per period
	// (--restart-budget 5/1h); a zero Count: no limit.
	RestartBudget Rate
	// FlapThreshold: a ConfigMap or Secret changing more than Count times
	// per period is flapping, and its restarts are held until it has been
	// quiet for FlapQuiet; a zero Count: off.
	FlapThreshold Rate
	FlapQuiet     time.Duration
	// MaxConcurrentRollouts is the most rollouts started by watcher in
	// progress at once; 0: no limit.
	MaxConcurrentRollouts int
	// RolloutTimeout is how long a rollout may take before it has failed.
	RolloutTimeout time.Duration
	// OnFailedRollout is OnFailedHold or OnFailedContinue: whether the
	// other restarts caused by the change of a failed rollout wait.
	OnFailedRollout string
	// ProducerTimeout bounds the wait of a restart for the producers of
	// its sources (an ExternalSecret syncing, a Certificate being issued);
	// 0: no bound. OnProducerTimeout is OnFailedHold or OnFailedContinue:
	// whether a restart whose producers have not landed by then waits on,
	// or rolls with what has landed.
	ProducerTimeout   time.Duration
	OnProducerTimeout string
	// Pinning lets workloads annotated watcher.dev/pin: "true" pin their
	// config revisions (package pin); PinningPolicy names the
	// MutatingAdmissionPolicy (and its binding) that must be installed for
	// it: without them, pinning stays off.
	Pinning       bool
	PinningPolicy string
	// PinningBudget is the most MiB of snapshots a namespace may hold;
	// beyond, restarts leave their sources live; 0: no budget.
	PinningBudget int
	// PinningGrace is how long a snapshot's workload keeps it besides its
	// current revision (snapshot.Owners.Grace): a restart in flight may
	// have reused it before its template is written.
	PinningGrace time.Duration

	// PrintInterval is how often the watched state is logged; 0 never.
	PrintInterval time.Duration
	// MetricsAddr and HealthAddr are the listen addresses of /metrics and of
	// /healthz and /readyz; "0" disables.
	MetricsAddr string
	HealthAddr  string
	// PprofAddr serves Go's /debug/pprof; "0" (the default) disables.
	PprofAddr string
	// ReloaderAddr serves what Stakater Reloader's Deployment probes and
	// scrapes (/live and /metrics, Reloader's port 9090) when watcher runs
	// in that Deployment; "0" (the default elsewhere) disables.
	ReloaderAddr string
	// MetricsByNamespace adds Reloader's per-namespace reload counter
	// (reloader_reload_executed_total_by_namespace), as Reloader's
	// METRICS_COUNT_BY_NAMESPACE=enabled does.
	MetricsByNamespace bool
	// LogFormat is "text" or "json"; LogLevel is "debug", "info" or "error".
	LogFormat string
	LogLevel  string

	// QPS and Burst limit requests to the Kubernetes API.
	QPS   float64
	Burst int

	// Namespace is watcher's own namespace, holding its Lease and its hash
	// key; empty: the pod's namespace in a cluster, else "default".
	Namespace string

	// Lock is how replicas share the work: "lease" (leader election),
	// "redis" (all active, a Redis lock per change) or "none".
	Lock string
	// Lease holds the leader-election settings of the lease mode.
	Lease Lease

	// Redis is the connection used by the redis lock backend.
	Redis Redis
	// LockExpiration is the longest a Redis lock lives.
	LockExpiration time.Duration

	// CacheSyncTimeout is the longest watcher waits for its informer caches
	// to fill at start-up; large clusters need more than small ones.
	CacheSyncTimeout time.Duration

	// Alert holds the alert settings (see package alert).
	Alert Alerts

	// Notes are remarks on the settings, for the log: a value read in an
	// unusual form, settings ignored because the lock mode does not use
	// them. They never hold a password.
	Notes []string
}

// The lock modes.
const (
	LockLease = "lease"
	LockRedis = "redis"
	LockNone  = "none"
)

// Lease holds the leader-election settings.
type Lease struct {
	Name          string
	Duration      time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// Redis holds the Redis connection settings.
type Redis struct {
	Host          string
	Port          int
	DB            int
	Username      string
	Password      string
	SocketTimeout time.Duration
	// TLS turns TLS on; CAFile (PEM) replaces the system roots and
	// ServerName the name checked in the certificate.
	TLS           bool
	TLSCAFile     string
	TLSServerName string
	// SentinelMaster, when set, finds the master through the Sentinels at
	// SentinelAddrs instead of connecting to Host:Port.
	SentinelMaster   string
	SentinelAddrs    []string
	SentinelPassword string
}

// Defaults returns the options watcher runs with when nothing is set.
func Defaults() *Options {
	return &Options{
		Settings:              settings.Defaults(),
		Coalesce:              time.Second,
		CoalesceMax:           30 * time.Second,
		SettleMax:             2 * time.Minute,
		Workers:               8,
		RestartStrategy:       restart.Default.Name(),
		RestartBudget:         Rate{Count: 5, Per: time.Hour},
		FlapThreshold:         Rate{Count: 5, Per: 10 * time.Minute},
		FlapQuiet:             2 * time.Minute,
		MaxConcurrentRollouts: 10,
		RolloutTimeout:        10 * time.Minute,
		OnFailedRollout:       OnFailedHold,
		ProducerTimeout:       10 * time.Minute,
		OnProducerTimeout:     OnFailedContinue,
		PinningPolicy:         "watcher-pins",
		PinningBudget:         64,
		PinningGrace:          10 * time.Minute,
		PrintInterval:         100 * time.Second,
		MetricsAddr:           ":8080",
		HealthAddr:            ":8081",
		PprofAddr:             "0",
		ReloaderAddr:          "0",
		LogFormat:             "text",
		LogLevel:              "info",
		QPS:                   50,
		Burst:                 100,
		Redis: Redis{
			Host:          "redis-stack-0.redis-service.watcher.svc.cluster.local",
			Port:          6379,
			SocketTimeout: 5 * time.Second,
		},
		LockExpiration:   300 * time.Second,
		CacheSyncTimeout: 10 * time.Minute,
		Lock:             LockLease,
		Alert:            Alerts{Sink: alert.Sinks[len(alert.Sinks)-1]},
		Lease:            Lease{Name: "watcher", Duration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second},
	}
}

// redisAnnotation marks the settings only the redis lock mode uses.
const redisAnnotation = "redis"

// BindFlags registers every option on fs, each with its environment variable.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	bind := func(v pflag.Value, name, env, usage string) { envflag.Bind(fs, v, name, env, usage) }
	// The Redis settings are checked only in the redis lock mode: see Parse.
	bindRedis := func(v pflag.Value, name, env, usage string) {
		bind(v, name, env, usage)
		_ = fs.SetAnnotation(name, redisAnnotation, []string{"true"})
	}
	// KUBECONFIG is read by client-go's loading rules (it may be a list),
	// not copied into the flag.
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "path to a kubeconfig; none: $KUBECONFIG, then ~/.kube/config")
	bind(envflag.OptionalBool(&o.LocalConfig), "local-config", "LOCAL_CONFIG", "True: use a kubeconfig; False: use the in-cluster config; empty: a kubeconfig if there is one, else in-cluster")

	o.Settings.BindFlags(fs)
	bind(envflag.Duration(&o.Coalesce), "coalesce", "COALESCE", "restart once a changed ConfigMap or Secret has been quiet this long, so a burst restarts once; 0: no wait")
	bind(envflag.Duration(&o.CoalesceMax), "coalesce-max", "COALESCE_MAX", "restart at the latest this long after the first change of a burst, however long it goes on")
	bind(envflag.Duration(&o.Settle), "settle", "SETTLE", "restart a workload once every ConfigMap and Secret it reads has been quiet this long, so a change written in parts (a username, then its password) rolls out once; 0: --coalesce; a workload's watcher.dev/settle sets its own")
	bind(envflag.Duration(&o.SettleMax), "settle-max", "SETTLE_MAX", "restart at the latest this long after the first change of a workload's change set, however busy its sources; a workload's watcher.dev/settle-max sets its own")
	bind(envflag.Bool(&o.CronJobTrigger), "cronjob-trigger", "CRONJOB_TRIGGER", "after restarting a CronJob, also create a Job from its new template now (as kubectl create job --from=cronjob/NAME)")
	fs.Lookup("cronjob-trigger").NoOptDefVal = "true"
	bind(envflag.Bool(&o.DryRun), "dry-run", "DRY_RUN", "decide as usual but write nothing to workloads: log each restart watcher would make and emit an Event WouldRestart on the workload (and, with --alert-on-reload, an alert)")
	fs.Lookup("dry-run").NoOptDefVal = "true"
	bind(envflag.IntRange(&o.Workers, 1, 1000, "a number of workers"), "workers", "WORKERS", "workloads handled in parallel")
	bind(envflag.OneOf(&o.RestartStrategy, restart.Names()...), "restart-strategy", "RESTART_STRATEGY", "how a restart is written: annotation (a pod-template annotation), env (an env var on every container), restarted-at (kubectl's kubectl.kubernetes.io/restartedAt pod-template annotation) or evict (the template is left alone, the pods are evicted, honouring PodDisruptionBudgets; needs the rights to list pods and evict them); a workload's annotation watcher.dev/restart-strategy overrides it")

	bind(rate{&o.RestartBudget}, "restart-budget", "RESTART_BUDGET", "most restarts of one workload per period, such as 5/1h; more are held, then one rollout brings it to the latest content; 0: no limit")
	bind(rate{&o.FlapThreshold}, "flap-threshold", "FLAP_THRESHOLD", "a ConfigMap or Secret changing more than this, such as 5/10m, is flapping: its restarts are held until it is quiet; 0: off")
	bind(envflag.Duration(&o.FlapQuiet), "flap-quiet", "FLAP_QUIET", "how long a flapping ConfigMap or Secret must stay unchanged before its restarts go on")
	bind(envflag.IntRange(&o.MaxConcurrentRollouts, 0, 100000, "a number of rollouts"), "max-concurrent-rollouts", "MAX_CONCURRENT_ROLLOUTS", "most rollouts started by watcher in progress at once; more restarts wait, in order of watcher.dev/restart-priority; 0: no limit")
	bind(envflag.Duration(&o.RolloutTimeout), "rollout-timeout", "ROLLOUT_TIMEOUT", "a rollout not done after this long has failed")
	bind(envflag.OneOf(&o.OnFailedRollout, OnFailedHold, OnFailedContinue), "on-failed-rollout", "ON_FAILED_ROLLOUT", "after a failed rollout, hold the other restarts of the same change until it recovers or is released (hold), or go on (continue)")
	bind(envflag.Duration(&o.ProducerTimeout), "producer-timeout", "PRODUCER_TIMEOUT", "how long a restart waits for the producers of its ConfigMaps and Secrets (an ExternalSecret syncing, a Certificate being issued, a SealedSecret unsealing) to land what they are writing; 0: no bound; a producer in error for a changed ConfigMap or Secret holds it as long, counted from the first change; one in error for an unchanged one is reported (Warning ProducerFailed), not waited for")
	bind(envflag.OneOf(&o.OnProducerTimeout, OnFailedHold, OnFailedContinue), "on-producer-timeout", "ON_PRODUCER_TIMEOUT", "when producers have not landed by --producer-timeout: restart with what has landed, with a Warning (continue), or hold until they do or a person releases it (hold)")

	bind(envflag.Bool(&o.Pinning), "pinning", "PINNING", `let workloads annotated watcher.dev/pin: "true" pin their config: each restart copies their ConfigMaps and Secrets into immutable snapshots their new pods read, so a rollback brings the config back with the code; needs the chart's pinning admission policies (pinning.enabled)`)
	fs.Lookup("pinning").NoOptDefVal = "true"
	bind(envflag.IntRange(&o.PinningBudget, 0, 1<<20, "a number of MiB"), "pinning-budget", "PINNING_BUDGET", "most MiB of config snapshots a namespace may hold (their content); a restart whose snapshots would go over it leaves those ConfigMaps and Secrets unpinned (live), with a Warning; 0: no budget")
	bind(envflag.Duration(&o.PinningGrace), "pinning-grace", "PINNING_GRACE", "how long a pinned workload keeps owning its snapshots besides the revision that pins them, once that revision is its current one (a restart in flight may reuse them before its template is written); then they go with the revisions alone")
	bind(envflag.String(&o.PinningPolicy), "pinning-policy", "PINNING_POLICY", "the name of the MutatingAdmissionPolicy, and of its binding, that pins pods at admission; pinning stays off while either is missing")

	bind(envflag.Seconds(&o.PrintInterval, 0), "print-time", "PRINT_TIME", "log the watched state every this many seconds; 0: never")
	bind(envflag.String(&o.MetricsAddr), "metrics-addr", "METRICS_ADDR", `address of /metrics; "0" disables`)
	bind(envflag.String(&o.HealthAddr), "health-addr", "HEALTH_ADDR", `address of /healthz and /readyz; "0" disables`)
	bind(envflag.String(&o.PprofAddr), "pprof-addr", "PPROF_ADDR", `address of Go's /debug/pprof profiles, for diagnosis; "0" disables`)
	bind(envflag.String(&o.ReloaderAddr), "reloader-addr", "RELOADER_ADDR", `address of what Stakater Reloader's Deployment probes and scrapes (/live and /metrics); "0" disables; default :9090 where RELOADER_NAMESPACE is set (Reloader's chart), else "0"`)
	bind(envflag.Bool(&o.MetricsByNamespace), "metrics-by-namespace", "METRICS_BY_NAMESPACE", "also count Reloader's reloads by namespace (reloader_reload_executed_total_by_namespace); Reloader's METRICS_COUNT_BY_NAMESPACE=enabled sets it too")
	fs.Lookup("metrics-by-namespace").NoOptDefVal = "true"
	bind(envflag.Aliased(&o.LogFormat, []string{"text", "json"}, map[string]string{"": "text"}), "log-format", "LOG_FORMAT", "log format: text or json (Reloader's empty value: text)")
	bind(envflag.Aliased(&o.LogLevel, []string{"debug", "info", "error"}, map[string]string{"trace": "debug", "warning": "info", "warn": "info", "fatal": "error", "panic": "error"}),
		"log-level", "LOG_LEVEL", "log level: debug, info or error (Reloader's trace is debug, warning info, fatal and panic error)")
	bind(envflag.PositiveFloat(&o.QPS), "kube-api-qps", "KUBE_API_QPS", "requests per second to the Kubernetes API")
	bind(envflag.IntRange(&o.Burst, 1, 100000, "a burst size"), "kube-api-burst", "KUBE_API_BURST", "request burst to the Kubernetes API")
	bind(envflag.Duration(&o.CacheSyncTimeout), "cache-sync-timeout", "CACHE_SYNC_TIMEOUT", "longest wait for the caches to fill at start-up, such as 10m; large clusters need more")

	bind(envflag.String(&o.Namespace), "lease-namespace", "POD_NAMESPACE", "watcher's own namespace, for its Lease and its hash key Secret; empty: RELOADER_NAMESPACE if set, else the pod's namespace in a cluster, else default")

	bind(envflag.OneOf(&o.Lock, LockLease, LockRedis, LockNone), "lock", "LOCK_BACKEND", "how replicas share the work: lease (one leader), redis (all active, a lock per change) or none (one replica); default: redis if REDIS_HOST is set, else lease")
	bind(envflag.String(&o.Lease.Name), "lease-name", "LEASE_NAME", "name of the leader-election Lease")
	bind(envflag.Duration(&o.Lease.Duration), "lease-duration", "LEASE_DURATION", "how long standbys wait before taking over a Lease that is not renewed")
	bind(envflag.Duration(&o.Lease.RenewDeadline), "lease-renew-deadline", "LEASE_RENEW_DEADLINE", "how long the leader keeps trying to renew before it gives up leading")
	bind(envflag.Duration(&o.Lease.RetryPeriod), "lease-retry-period", "LEASE_RETRY_PERIOD", "how often leader-election actions are tried")

	o.bindAlerts(fs, bind)

	bindRedis(envflag.String(&o.Redis.Host), "redis-host", "REDIS_HOST", "Redis host")
	bindRedis(&redisPort{port: &o.Redis.Port}, "redis-port", "REDIS_PORT", "Redis port; the tcp://host:port form Kubernetes gives REDIS_PORT for a Service named redis is read as its port")
	bindRedis(envflag.IntRange(&o.Redis.DB, 0, 1<<20, "a Redis database number"), "redis-db", "DB", "Redis database number")
	bindRedis(envflag.String(&o.Redis.Username), "redis-username", "USERNAME", "Redis user name")
	bindRedis(envflag.Secret(&o.Redis.Password), "redis-password", "PASSWORD", "Redis password")
	bindRedis(envflag.Seconds(&o.Redis.SocketTimeout, 1), "redis-socket-timeout", "REDIS_SOCKET_TIMEOUT", "Redis read/write timeout in seconds")
	bindRedis(envflag.Seconds(&o.LockExpiration, 1), "lock-expiration-time", "LOCK_EXPIRATION_TIME", "longest a Redis lock lives, in seconds")
	bindRedis(envflag.Bool(&o.Redis.TLS), "redis-tls", "REDIS_TLS", "connect to Redis over TLS")
	fs.Lookup("redis-tls").NoOptDefVal = "true"
	bindRedis(envflag.String(&o.Redis.TLSCAFile), "redis-tls-ca-file", "REDIS_TLS_CA_FILE", "PEM file of the CAs that sign Redis's certificate; none: the system's")
	bindRedis(envflag.String(&o.Redis.TLSServerName), "redis-tls-server-name", "REDIS_TLS_SERVER_NAME", "name to check in Redis's certificate; none: the host")
	bindRedis(envflag.String(&o.Redis.SentinelMaster), "redis-sentinel-master", "REDIS_SENTINEL_MASTER", "Sentinel master name; set to find Redis through Sentinel")
	bindRedis(envflag.List(&o.Redis.SentinelAddrs), "redis-sentinel-addrs", "REDIS_SENTINEL_ADDRS", "Sentinel host:port list (comma-separated)")
	bindRedis(envflag.Secret(&o.Redis.SentinelPassword), "redis-sentinel-password", "REDIS_SENTINEL_PASSWORD", "Sentinel password")
}
