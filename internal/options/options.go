// Package options holds watcher's settings. Every setting is a command-line
// flag with an environment-variable equivalent; a flag given on the command
// line wins over the environment, which wins over the default.
//
// The environment variable names and defaults of the original design
// (REDIS_HOST, LOCK_EXPIRATION_TIME, IGNORE_SECRET_NAMESPACES, PRINT_TIME...)
// work exactly as existing deployments set them.
package options

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/watcher-dev/watcher/internal/alert"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/settings"
)

// DefaultIgnoredNamespaces are the namespaces whose ConfigMaps and Secrets
// are ignored unless told otherwise: system namespaces whose workloads are
// managed by their own operators.
var DefaultIgnoredNamespaces = []string{
	"ingress-aws-lb-controller", "istio-system", "karpenter", "kube-system", "kubesphere-system",
}

// Options are watcher's settings.
type Options struct {
	// Kubeconfig is an explicit kubeconfig path (--kubeconfig).
	Kubeconfig string
	// LocalConfig: true uses a kubeconfig, false the in-cluster config, nil
	// tries a kubeconfig first and falls back to the in-cluster config.
	LocalConfig *bool

	// Namespaces limits watching to these namespaces; empty watches all.
	Namespaces []string
	// IgnoreConfigMapNamespaces and IgnoreSecretNamespaces are namespaces
	// whose ConfigMaps, respectively Secrets, are not watched.
	IgnoreConfigMapNamespaces []string
	IgnoreSecretNamespaces    []string
	// WorkloadSelector and ConfigSelector are label selectors limiting the
	// workloads and the ConfigMaps/Secrets watched; empty selects all.
	WorkloadSelector string
	ConfigSelector   string
	// NamespaceSelector is a label selector of the namespaces watched:
	// ConfigMaps, Secrets and workloads of other namespaces are left
	// alone; empty selects all (see package controller, namespaces.go).
	NamespaceSelector string
	// IgnoreWorkloadKinds are workload kinds watcher neither watches nor
	// restarts (kind names: CronJob, DaemonSet, ...).
	IgnoreWorkloadKinds []string
	// Annotation is the opt-out annotation key: "false" opts out.
	Annotation string
	// AnnotationKeys renames the opting-in annotations (optin.Keys), as
	// Reloader's annotation flags do; nil: none.
	AnnotationKeys optin.Keys
	// Discovery is "all" (every workload's references count) or
	// "annotated" (only those of workloads that opt in by an annotation).
	Discovery string
	// RestartOnCreate restarts a workload when an object it uses, and that
	// did not exist, is created.
	RestartOnCreate bool
	// ReloadOnDelete restarts a workload when an object it uses is deleted,
	// if its pods can start without it.
	ReloadOnDelete bool
	// Coalesce is how long a changed object must stay quiet before its
	// users are handled, so that a burst of changes restarts them once;
	// CoalesceMax bounds the wait under a never-ending stream of changes.
	Coalesce    time.Duration
	CoalesceMax time.Duration
	// CronJobTrigger also runs a restarted CronJob at once: a Job is created
	// from its new template, as kubectl create job --from=cronjob/NAME does.
	CronJobTrigger bool
	// CSI restarts the workloads that opt in when the Secrets Store CSI
	// Driver rotates what their pods mount (package csi), while its
	// SecretProviderClassPodStatus API is served.
	CSI bool
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
	// HashKeySecret names the Secret holding the key of the hashes watcher
	// records on workloads.
	HashKeySecret string

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
		IgnoreConfigMapNamespaces: append([]string(nil), DefaultIgnoredNamespaces...),
		IgnoreSecretNamespaces:    append([]string(nil), DefaultIgnoredNamespaces...),
		Annotation:                "require-restart",
		Discovery:                 plan.DiscoveryAll,
		Coalesce:                  time.Second,
		CoalesceMax:               30 * time.Second,
		Workers:                   8,
		RestartStrategy:           restart.Default.Name(),
		RestartBudget:             Rate{Count: 5, Per: time.Hour},
		FlapThreshold:             Rate{Count: 5, Per: 10 * time.Minute},
		FlapQuiet:                 2 * time.Minute,
		MaxConcurrentRollouts:     10,
		RolloutTimeout:            10 * time.Minute,
		OnFailedRollout:           OnFailedHold,
		PrintInterval:             100 * time.Second,
		MetricsAddr:               ":8080",
		HealthAddr:                ":8081",
		PprofAddr:                 "0",
		ReloaderAddr:              "0",
		LogFormat:                 "text",
		LogLevel:                  "info",
		QPS:                       50,
		Burst:                     100,
		Redis: Redis{
			Host:          "redis-stack-0.redis-service.watcher.svc.cluster.local",
			Port:          6379,
			SocketTimeout: 5 * time.Second,
		},
		LockExpiration:   300 * time.Second,
		CacheSyncTimeout: 10 * time.Minute,
		HashKeySecret:    "watcher-hash-key",
		Lock:             LockLease,
		Alert:            Alerts{Sink: alert.Sinks[len(alert.Sinks)-1]},
		Lease:            Lease{Name: "watcher", Duration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second},
	}
}

// envAnnotation is the pflag annotation holding a flag's environment
// variable; redisAnnotation marks the settings only the redis lock mode uses.
const (
	envAnnotation   = "env"
	redisAnnotation = "redis"
)

// BindFlags registers every option on fs, each with its environment variable.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	bind := func(v pflag.Value, name, env, usage string) {
		fs.Var(v, name, usage)
		_ = fs.SetAnnotation(name, envAnnotation, []string{env})
	}
	// The Redis settings are checked only in the redis lock mode: see Parse.
	bindRedis := func(v pflag.Value, name, env, usage string) {
		bind(v, name, env, usage)
		_ = fs.SetAnnotation(name, redisAnnotation, []string{"true"})
	}
	// KUBECONFIG is read by client-go's loading rules (it may be a list),
	// not copied into the flag.
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "path to a kubeconfig; none: $KUBECONFIG, then ~/.kube/config")
	bind(optionalBool{&o.LocalConfig}, "local-config", "LOCAL_CONFIG", "True: use a kubeconfig; False: use the in-cluster config; empty: a kubeconfig if there is one, else in-cluster")

	bind(appending{&o.Namespaces}, "namespaces", "NAMESPACES", "watch only these namespaces (comma-separated, or the flag repeated); empty: all, or KUBERNETES_NAMESPACE alone if set")
	bind(list{&o.IgnoreConfigMapNamespaces}, "ignore-configmap-namespaces", "IGNORE_CONFIGMAP_NAMESPACES", "namespaces whose ConfigMaps are ignored (comma-separated; * for all)")
	bind(list{&o.IgnoreSecretNamespaces}, "ignore-secret-namespaces", "IGNORE_SECRET_NAMESPACES", "namespaces whose Secrets are ignored (comma-separated; * for all)")
	bind(list{&o.IgnoreWorkloadKinds}, "ignore-workload-kinds", "IGNORE_WORKLOAD_KINDS", "workload kinds never watched nor restarted (comma-separated kind names: CronJob, DaemonSet, Job, ...)")
	bind((*stringValue)(&o.WorkloadSelector), "workload-selector", "WORKLOAD_SELECTOR", "label selector of the workloads to restart; empty: all")
	bind((*stringValue)(&o.ConfigSelector), "config-selector", "CONFIG_SELECTOR", "label selector of the ConfigMaps and Secrets to watch; empty: all")
	bind(namespaceSelector{&o.NamespaceSelector}, "namespace-selector", "NAMESPACE_SELECTOR", "label selector of the namespaces to watch, followed while watcher runs (Reloader's key:value and key:* forms too); empty: all")
	bind((*stringValue)(&o.Annotation), "annotation", "ANNOTATION", `opt-out annotation key: "false" on a workload, ConfigMap or Secret stops restarts`)
	bind(keyMap{&o.AnnotationKeys}, "annotation-keys", "ANNOTATION_KEYS", "annotations read under other keys, as Reloader's --auto-annotation and like flags: watcher's key=the key read in its place (comma-separated); that key is then read with the meaning of watcher's, and watcher's own no longer")
	bind(oneOf{&o.Discovery, []string{plan.DiscoveryAll, plan.DiscoveryAnnotated}}, "discovery", "DISCOVERY", `which workloads are restarted: all, or annotated (only those that opt in with watcher.dev/auto or a Reloader annotation)`)
	bind(boolean{&o.RestartOnCreate}, "reload-on-create", "RELOAD_ON_CREATE", "also restart when a ConfigMap or Secret a workload uses is created")
	bind(boolean{&o.RestartOnCreate}, "restart-on-create", "RESTART_ON_CREATE", "the same as --reload-on-create (RELOAD_ON_CREATE), its former name")
	bind(boolean{&o.ReloadOnDelete}, "reload-on-delete", "RELOAD_ON_DELETE", "also restart when a ConfigMap or Secret a workload uses is deleted, if its pods can start without it")
	for _, name := range []string{"reload-on-create", "restart-on-create", "reload-on-delete"} {
		fs.Lookup(name).NoOptDefVal = "true" // --reload-on-create alone means true
	}
	_ = fs.SetAnnotation("reload-on-create", sameAsAnnotation, []string{"restart-on-create"})
	_ = fs.SetAnnotation("restart-on-create", sameAsAnnotation, []string{"reload-on-create"})
	bind(duration{&o.Coalesce}, "coalesce", "COALESCE", "restart once a changed ConfigMap or Secret has been quiet this long, so a burst restarts once; 0: no wait")
	bind(duration{&o.CoalesceMax}, "coalesce-max", "COALESCE_MAX", "restart at the latest this long after the first change of a burst, however long it goes on")
	bind(boolean{&o.CronJobTrigger}, "cronjob-trigger", "CRONJOB_TRIGGER", "after restarting a CronJob, also create a Job from its new template now (as kubectl create job --from=cronjob/NAME)")
	fs.Lookup("cronjob-trigger").NoOptDefVal = "true"
	bind(boolean{&o.CSI}, "csi", "CSI", "restart the workloads annotated secretproviderclass.reloader.stakater.com/reload or .../auto (or reloader.stakater.com/auto) when the Secrets Store CSI Driver rotates what their pods mount (needs the rights to get pods and replicasets, and to list and watch secretproviderclasspodstatuses)")
	fs.Lookup("csi").NoOptDefVal = "true"
	bind(boolean{&o.DryRun}, "dry-run", "DRY_RUN", "decide as usual but write nothing to workloads: log each restart watcher would make and emit an Event WouldRestart on the workload (and, with --alert-on-reload, an alert)")
	fs.Lookup("dry-run").NoOptDefVal = "true"
	bind(intRange{&o.Workers, 1, 1000, "a number of workers"}, "workers", "WORKERS", "workloads handled in parallel")
	bind(oneOf{&o.RestartStrategy, restart.Names()}, "restart-strategy", "RESTART_STRATEGY", "how a restart is written: annotation (a pod-template annotation), env (an env var on every container), restarted-at (kubectl's kubectl.kubernetes.io/restartedAt pod-template annotation) or evict (the template is left alone, the pods are evicted, honouring PodDisruptionBudgets; needs the rights to list pods and evict them); a workload's annotation watcher.dev/restart-strategy overrides it")

	bind(rate{&o.RestartBudget}, "restart-budget", "RESTART_BUDGET", "most restarts of one workload per period, such as 5/1h; more are held, then one rollout brings it to the latest content; 0: no limit")
	bind(rate{&o.FlapThreshold}, "flap-threshold", "FLAP_THRESHOLD", "a ConfigMap or Secret changing more than this, such as 5/10m, is flapping: its restarts are held until it is quiet; 0: off")
	bind(duration{&o.FlapQuiet}, "flap-quiet", "FLAP_QUIET", "how long a flapping ConfigMap or Secret must stay unchanged before its restarts go on")
	bind(intRange{&o.MaxConcurrentRollouts, 0, 100000, "a number of rollouts"}, "max-concurrent-rollouts", "MAX_CONCURRENT_ROLLOUTS", "most rollouts started by watcher in progress at once; more restarts wait, in order of watcher.dev/restart-priority; 0: no limit")
	bind(duration{&o.RolloutTimeout}, "rollout-timeout", "ROLLOUT_TIMEOUT", "a rollout not done after this long has failed")
	bind(oneOf{&o.OnFailedRollout, []string{OnFailedHold, OnFailedContinue}}, "on-failed-rollout", "ON_FAILED_ROLLOUT", "after a failed rollout, hold the other restarts of the same change until it recovers or is released (hold), or go on (continue)")

	bind(seconds{&o.PrintInterval, 0}, "print-time", "PRINT_TIME", "log the watched state every this many seconds; 0: never")
	bind((*stringValue)(&o.MetricsAddr), "metrics-addr", "METRICS_ADDR", `address of /metrics; "0" disables`)
	bind((*stringValue)(&o.HealthAddr), "health-addr", "HEALTH_ADDR", `address of /healthz and /readyz; "0" disables`)
	bind((*stringValue)(&o.PprofAddr), "pprof-addr", "PPROF_ADDR", `address of Go's /debug/pprof profiles, for diagnosis; "0" disables`)
	bind((*stringValue)(&o.ReloaderAddr), "reloader-addr", "RELOADER_ADDR", `address of what Stakater Reloader's Deployment probes and scrapes (/live and /metrics); "0" disables; default :9090 where RELOADER_NAMESPACE is set (Reloader's chart), else "0"`)
	bind(boolean{&o.MetricsByNamespace}, "metrics-by-namespace", "METRICS_BY_NAMESPACE", "also count Reloader's reloads by namespace (reloader_reload_executed_total_by_namespace); Reloader's METRICS_COUNT_BY_NAMESPACE=enabled sets it too")
	fs.Lookup("metrics-by-namespace").NoOptDefVal = "true"
	bind(aliased{oneOf{&o.LogFormat, []string{"text", "json"}}, map[string]string{"": "text"}}, "log-format", "LOG_FORMAT", "log format: text or json (Reloader's empty value: text)")
	bind(aliased{oneOf{&o.LogLevel, []string{"debug", "info", "error"}}, map[string]string{"trace": "debug", "warning": "info", "warn": "info", "fatal": "error", "panic": "error"}},
		"log-level", "LOG_LEVEL", "log level: debug, info or error (Reloader's trace is debug, warning info, fatal and panic error)")
	bind(positiveFloat{&o.QPS}, "kube-api-qps", "KUBE_API_QPS", "requests per second to the Kubernetes API")
	bind(intRange{&o.Burst, 1, 100000, "a burst size"}, "kube-api-burst", "KUBE_API_BURST", "request burst to the Kubernetes API")
	bind(duration{&o.CacheSyncTimeout}, "cache-sync-timeout", "CACHE_SYNC_TIMEOUT", "longest wait for the caches to fill at start-up, such as 10m; large clusters need more")

	bind((*stringValue)(&o.Namespace), "lease-namespace", "POD_NAMESPACE", "watcher's own namespace, for its Lease and its hash key Secret; empty: RELOADER_NAMESPACE if set, else the pod's namespace in a cluster, else default")
	bind((*stringValue)(&o.HashKeySecret), "hash-key-secret", "HASH_KEY_SECRET", "Secret (in watcher's namespace) holding the key of the recorded hashes; created if missing")

	bind(oneOf{&o.Lock, []string{LockLease, LockRedis, LockNone}}, "lock", "LOCK_BACKEND", "how replicas share the work: lease (one leader), redis (all active, a lock per change) or none (one replica); default: redis if REDIS_HOST is set, else lease")
	bind((*stringValue)(&o.Lease.Name), "lease-name", "LEASE_NAME", "name of the leader-election Lease")
	bind(duration{&o.Lease.Duration}, "lease-duration", "LEASE_DURATION", "how long standbys wait before taking over a Lease that is not renewed")
	bind(duration{&o.Lease.RenewDeadline}, "lease-renew-deadline", "LEASE_RENEW_DEADLINE", "how long the leader keeps trying to renew before it gives up leading")
	bind(duration{&o.Lease.RetryPeriod}, "lease-retry-period", "LEASE_RETRY_PERIOD", "how often leader-election actions are tried")

	o.bindAlerts(fs, bind)

	bindRedis((*stringValue)(&o.Redis.Host), "redis-host", "REDIS_HOST", "Redis host")
	bindRedis(&redisPort{port: &o.Redis.Port}, "redis-port", "REDIS_PORT", "Redis port; the tcp://host:port form Kubernetes gives REDIS_PORT for a Service named redis is read as its port")
	bindRedis(intRange{&o.Redis.DB, 0, 1 << 20, "a Redis database number"}, "redis-db", "DB", "Redis database number")
	bindRedis((*stringValue)(&o.Redis.Username), "redis-username", "USERNAME", "Redis user name")
	bindRedis(secret{&o.Redis.Password}, "redis-password", "PASSWORD", "Redis password")
	bindRedis(seconds{&o.Redis.SocketTimeout, 1}, "redis-socket-timeout", "REDIS_SOCKET_TIMEOUT", "Redis read/write timeout in seconds")
	bindRedis(seconds{&o.LockExpiration, 1}, "lock-expiration-time", "LOCK_EXPIRATION_TIME", "longest a Redis lock lives, in seconds")
	bindRedis(boolean{&o.Redis.TLS}, "redis-tls", "REDIS_TLS", "connect to Redis over TLS")
	fs.Lookup("redis-tls").NoOptDefVal = "true"
	bindRedis((*stringValue)(&o.Redis.TLSCAFile), "redis-tls-ca-file", "REDIS_TLS_CA_FILE", "PEM file of the CAs that sign Redis's certificate; none: the system's")
	bindRedis((*stringValue)(&o.Redis.TLSServerName), "redis-tls-server-name", "REDIS_TLS_SERVER_NAME", "name to check in Redis's certificate; none: the host")
	bindRedis((*stringValue)(&o.Redis.SentinelMaster), "redis-sentinel-master", "REDIS_SENTINEL_MASTER", "Sentinel master name; set to find Redis through Sentinel")
	bindRedis(list{&o.Redis.SentinelAddrs}, "redis-sentinel-addrs", "REDIS_SENTINEL_ADDRS", "Sentinel host:port list (comma-separated)")
	bindRedis(secret{&o.Redis.SentinelPassword}, "redis-sentinel-password", "REDIS_SENTINEL_PASSWORD", "Sentinel password")
}

// stringValue is a plain string flag.
type stringValue string

func (s *stringValue) String() string     { return string(*s) }
func (s *stringValue) Type() string       { return "string" }
func (s *stringValue) Set(v string) error { *s = stringValue(v); return nil }

// duration is a Go duration ("2s", "500ms").
type duration struct{ d *time.Duration }

func (d duration) String() string { return d.d.String() }
func (d duration) Type() string   { return "duration" }
func (d duration) Set(v string) error {
	x, err := time.ParseDuration(v)
	if err != nil || x < 0 {
		return fmt.Errorf(`want a duration such as "2s" or "500ms", at least 0`)
	}
	*d.d = x
	return nil
}

// Settings returns the settings that change what watcher decides: those the
// controller publishes for the explain and graph commands (package
// settings).
func (o *Options) Settings() settings.Settings {
	return settings.Settings{
		Annotation:                o.Annotation,
		Discovery:                 o.Discovery,
		Namespaces:                o.Namespaces,
		IgnoreConfigMapNamespaces: o.IgnoreConfigMapNamespaces,
		IgnoreSecretNamespaces:    o.IgnoreSecretNamespaces,
		WorkloadSelector:          o.WorkloadSelector,
		ConfigSelector:            o.ConfigSelector,
		NamespaceSelector:         o.NamespaceSelector,
		IgnoreWorkloadKinds:       o.IgnoreWorkloadKinds,
		RestartOnCreate:           o.RestartOnCreate,
		ReloadOnDelete:            o.ReloadOnDelete,
		HashKeySecret:             o.HashKeySecret,
		AnnotationKeys:            o.AnnotationKeys,
		CSI:                       o.CSI,
	}
}
