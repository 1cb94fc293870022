package options_test

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/options"
	decision "github.com/watcher-dev/watcher/internal/settings"
)

const password = "pw-Sup3r-s3cret"

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func ptr[T any](v T) *T { return &v }

// defaults are the settings of the original design, written out rather than
// taken from options.Defaults so that a changed default fails a test.
func defaults() *options.Options {
	ignored := []string{"ingress-aws-lb-controller", "istio-system", "karpenter", "kube-system", "kubesphere-system"}
	return &options.Options{
		Settings: decision.Settings{
			IgnoreConfigMapNamespaces: ignored,
			IgnoreSecretNamespaces:    append([]string(nil), ignored...),
			Annotation:                "require-restart",
			Discovery:                 "all",
			HashKeySecret:             "watcher-hash-key",
		},
		Coalesce:              time.Second,
		CoalesceMax:           30 * time.Second,
		SettleMax:             2 * time.Minute,
		ProducerTimeout:       10 * time.Minute,
		OnProducerTimeout:     options.OnFailedContinue,
		PinningPolicy:         "watcher-pins",
		PinningBudget:         64,
		PinningGrace:          10 * time.Minute,
		Workers:               8,
		RestartStrategy:       "annotation",
		RestartBudget:         options.Rate{Count: 5, Per: time.Hour},
		FlapThreshold:         options.Rate{Count: 5, Per: 10 * time.Minute},
		FlapQuiet:             2 * time.Minute,
		MaxConcurrentRollouts: 10,
		RolloutTimeout:        10 * time.Minute,
		OnFailedRollout:       "hold",
		PrintInterval:         100 * time.Second,
		MetricsAddr:           ":8080",
		HealthAddr:            ":8081",
		PprofAddr:             "0",
		ReloaderAddr:          "0",
		LogFormat:             "text",
		LogLevel:              "info",
		QPS:                   50,
		Burst:                 100,
		Redis: options.Redis{
			Host:          "redis-stack-0.redis-service.watcher.svc.cluster.local",
			Port:          6379,
			DB:            0,
			SocketTimeout: 5 * time.Second,
		},
		LockExpiration:   300 * time.Second,
		CacheSyncTimeout: 10 * time.Minute,
		Lock:             "lease",
		Lease:            options.Lease{Name: "watcher", Duration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second},
		Alert:            options.Alerts{Sink: "webhook"},
	}
}

func TestParseDefaults(t *testing.T) {
	for name, getenv := range map[string]func(string) (string, bool){
		"no environment":        env(nil),
		"unrelated environment": env(map[string]string{"HOME": "/root", "PATH": "/bin", "KUBECONFIG": "/k"}),
	} {
		t.Run(name, func(t *testing.T) {
			got, err := options.Parse(nil, getenv, io.Discard)
			if err != nil {
				t.Fatalf("Parse() error: %v", err)
			}
			if diff := cmp.Diff(defaults(), got); diff != "" {
				t.Errorf("Parse() mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if diff := cmp.Diff(defaults(), options.Defaults()); diff != "" {
		t.Errorf("Defaults() mismatch (-want +got):\n%s", diff)
	}
}

// TestDefaultsNotShared checks that changing one Options does not change the
// defaults of the next.
func TestDefaultsNotShared(t *testing.T) {
	o := options.Defaults()
	o.IgnoreConfigMapNamespaces[0] = "changed"
	o.IgnoreSecretNamespaces[0] = "changed"
	if diff := cmp.Diff(defaults(), options.Defaults()); diff != "" {
		t.Errorf("Defaults() changed by editing an earlier result (-want +got):\n%s", diff)
	}
}

// settings lists every environment variable with a valid value, the flag
// that matches it, and the option it must set.
var settings = []struct {
	env, flag, value string
	set              func(*options.Options)
}{
	{"LOCAL_CONFIG", "local-config", "True", func(o *options.Options) { o.LocalConfig = ptr(true) }},
	{"NAMESPACES", "namespaces", " a, b ,,c", func(o *options.Options) { o.Namespaces = []string{"a", "b", "c"} }},
	{"IGNORE_CONFIGMAP_NAMESPACES", "ignore-configmap-namespaces", "x,y", func(o *options.Options) { o.IgnoreConfigMapNamespaces = []string{"x", "y"} }},
	{"IGNORE_SECRET_NAMESPACES", "ignore-secret-namespaces", "z", func(o *options.Options) { o.IgnoreSecretNamespaces = []string{"z"} }},
	{"IGNORE_WORKLOAD_KINDS", "ignore-workload-kinds", "CronJob,DaemonSet", func(o *options.Options) { o.IgnoreWorkloadKinds = []string{"CronJob", "DaemonSet"} }},
	{"WORKLOAD_SELECTOR", "workload-selector", "app=web,tier!=db", func(o *options.Options) { o.WorkloadSelector = "app=web,tier!=db" }},
	{"CONFIG_SELECTOR", "config-selector", "watch in (yes)", func(o *options.Options) { o.ConfigSelector = "watch in (yes)" }},
	{"NAMESPACE_SELECTOR", "namespace-selector", "team:on, tier:*,env in (a,b)", func(o *options.Options) { o.NamespaceSelector = "team=on,tier,env in (a,b)" }},
	{"ANNOTATION", "annotation", "example.com/restart", func(o *options.Options) { o.Annotation = "example.com/restart" }},
	{"ANNOTATION_KEYS", "annotation-keys", "reloader.stakater.com/auto=example.com/auto", func(o *options.Options) {
		o.AnnotationKeys = optin.Keys{"reloader.stakater.com/auto": "example.com/auto"}
	}},
	{"DISCOVERY", "discovery", "annotated", func(o *options.Options) { o.Discovery = "annotated" }},
	{"RESTART_ON_CREATE", "restart-on-create", "True", func(o *options.Options) { o.RestartOnCreate = true }},
	{"RELOAD_ON_CREATE", "reload-on-create", "True", func(o *options.Options) { o.RestartOnCreate = true }},
	{"RELOAD_ON_DELETE", "reload-on-delete", "true", func(o *options.Options) { o.ReloadOnDelete = true }},
	{"COALESCE", "coalesce", "1500ms", func(o *options.Options) { o.Coalesce = 1500 * time.Millisecond }},
	{"COALESCE_MAX", "coalesce-max", "2m", func(o *options.Options) { o.CoalesceMax = 2 * time.Minute }},
	{"SETTLE", "settle", "45s", func(o *options.Options) { o.Settle = 45 * time.Second }},
	{"SETTLE_MAX", "settle-max", "5m", func(o *options.Options) { o.SettleMax = 5 * time.Minute }},
	{"PRODUCER_TIMEOUT", "producer-timeout", "3m", func(o *options.Options) { o.ProducerTimeout = 3 * time.Minute }},
	{"PINNING", "pinning", "true", func(o *options.Options) { o.Pinning = true }},
	{"PINNING_POLICY", "pinning-policy", "pins", func(o *options.Options) { o.PinningPolicy = "pins" }},
	{"PINNING_BUDGET", "pinning-budget", "16", func(o *options.Options) { o.PinningBudget = 16 }},
	{"PINNING_GRACE", "pinning-grace", "5s", func(o *options.Options) { o.PinningGrace = 5 * time.Second }},
	{"ON_PRODUCER_TIMEOUT", "on-producer-timeout", "hold", func(o *options.Options) { o.OnProducerTimeout = options.OnFailedHold }},
	{"CRONJOB_TRIGGER", "cronjob-trigger", "true", func(o *options.Options) { o.CronJobTrigger = true }},
	{"CSI", "csi", "true", func(o *options.Options) { o.CSI = true }},
	{"DRY_RUN", "dry-run", "true", func(o *options.Options) { o.DryRun = true }},
	{"WORKERS", "workers", "3", func(o *options.Options) { o.Workers = 3 }},
	{"RESTART_STRATEGY", "restart-strategy", "Env", func(o *options.Options) { o.RestartStrategy = "env" }},
	{"RESTART_BUDGET", "restart-budget", "2/20s", func(o *options.Options) { o.RestartBudget = options.Rate{Count: 2, Per: 20 * time.Second} }},
	{"FLAP_THRESHOLD", "flap-threshold", "0", func(o *options.Options) { o.FlapThreshold = options.Rate{} }},
	{"FLAP_QUIET", "flap-quiet", "3s", func(o *options.Options) { o.FlapQuiet = 3 * time.Second }},
	{"MAX_CONCURRENT_ROLLOUTS", "max-concurrent-rollouts", "0", func(o *options.Options) { o.MaxConcurrentRollouts = 0 }},
	{"ROLLOUT_TIMEOUT", "rollout-timeout", "30s", func(o *options.Options) { o.RolloutTimeout = 30 * time.Second }},
	{"ON_FAILED_ROLLOUT", "on-failed-rollout", "Continue", func(o *options.Options) { o.OnFailedRollout = "continue" }},
	{"PRINT_TIME", "print-time", "0", func(o *options.Options) { o.PrintInterval = 0 }},
	{"METRICS_ADDR", "metrics-addr", "127.0.0.1:0", func(o *options.Options) { o.MetricsAddr = "127.0.0.1:0" }},
	{"HEALTH_ADDR", "health-addr", "0", func(o *options.Options) { o.HealthAddr = "0" }},
	{"PPROF_ADDR", "pprof-addr", "127.0.0.1:6060", func(o *options.Options) { o.PprofAddr = "127.0.0.1:6060" }},
	{"RELOADER_ADDR", "reloader-addr", ":9091", func(o *options.Options) { o.ReloaderAddr = ":9091" }},
	{"METRICS_BY_NAMESPACE", "metrics-by-namespace", "true", func(o *options.Options) { o.MetricsByNamespace = true }},
	{"LOG_FORMAT", "log-format", "json", func(o *options.Options) { o.LogFormat = "json" }},
	{"LOG_LEVEL", "log-level", "debug", func(o *options.Options) { o.LogLevel = "debug" }},
	{"KUBE_API_QPS", "kube-api-qps", "12.5", func(o *options.Options) { o.QPS = 12.5 }},
	{"KUBE_API_BURST", "kube-api-burst", "7", func(o *options.Options) { o.Burst = 7 }},
	{"CACHE_SYNC_TIMEOUT", "cache-sync-timeout", "30m", func(o *options.Options) { o.CacheSyncTimeout = 30 * time.Minute }},
	{"POD_NAMESPACE", "lease-namespace", "watcher", func(o *options.Options) { o.Namespace = "watcher" }},
	{"HASH_KEY_SECRET", "hash-key-secret", "my-key", func(o *options.Options) { o.HashKeySecret = "my-key" }},
	{"LOCK_BACKEND", "lock", "none", func(o *options.Options) { o.Lock = "none" }},
	{"LEASE_NAME", "lease-name", "my-watcher", func(o *options.Options) { o.Lease.Name = "my-watcher" }},
	{"LEASE_DURATION", "lease-duration", "30s", func(o *options.Options) { o.Lease.Duration = 30 * time.Second }},
	{"LEASE_RENEW_DEADLINE", "lease-renew-deadline", "5s", func(o *options.Options) { o.Lease.RenewDeadline = 5 * time.Second }},
	{"LEASE_RETRY_PERIOD", "lease-retry-period", "1s", func(o *options.Options) { o.Lease.RetryPeriod = time.Second }},
	{"REDIS_HOST", "redis-host", "10.0.0.7", func(o *options.Options) { o.Redis.Host = "10.0.0.7"; o.Lock = "redis" }},
	{"REDIS_TLS", "redis-tls", "true", func(o *options.Options) { o.Redis.TLS = true }},
	{"REDIS_TLS_CA_FILE", "redis-tls-ca-file", "/dev/null", func(o *options.Options) { o.Redis.TLSCAFile = "/dev/null" }},
	{"REDIS_TLS_SERVER_NAME", "redis-tls-server-name", "redis.example", func(o *options.Options) { o.Redis.TLSServerName = "redis.example" }},
	{"REDIS_SENTINEL_PASSWORD", "redis-sentinel-password", "pw", func(o *options.Options) { o.Redis.SentinelPassword = "pw" }},
	{"REDIS_PORT", "redis-port", "6380", func(o *options.Options) { o.Redis.Port = 6380 }},
	{"DB", "redis-db", "3", func(o *options.Options) { o.Redis.DB = 3 }},
	{"USERNAME", "redis-username", "watcher", func(o *options.Options) { o.Redis.Username = "watcher" }},
	{"PASSWORD", "redis-password", password, func(o *options.Options) { o.Redis.Password = password }},
	{"REDIS_SOCKET_TIMEOUT", "redis-socket-timeout", "12", func(o *options.Options) { o.Redis.SocketTimeout = 12 * time.Second }},
	{"LOCK_EXPIRATION_TIME", "lock-expiration-time", "60", func(o *options.Options) { o.LockExpiration = time.Minute }},
	{"ALERT_SINK", "alert-sink", "Slack", func(o *options.Options) { o.Alert.Sink = "slack" }},
	{"ALERT_WEBHOOK_URL", "alert-webhook-url", "https://hooks.example/T0/B0/x", func(o *options.Options) { o.Alert.WebhookURL = "https://hooks.example/T0/B0/x" }},
	{"ALERT_WEBHOOK_URL_SECRET", "alert-webhook-url-secret", "watcher/alerts:url", func(o *options.Options) { o.Alert.WebhookURLSecret = "watcher/alerts:url" }},
	{"ALERT_ADDITIONAL_INFO", "alert-additional-info", "cluster prod-1", func(o *options.Options) { o.Alert.AdditionalInfo = "cluster prod-1" }},
	{"ALERT_WEBHOOK_PROXY", "alert-webhook-proxy", "http://proxy:3128", func(o *options.Options) { o.Alert.WebhookProxy = "http://proxy:3128" }},
}

func TestParseSetting(t *testing.T) {
	for _, s := range settings {
		want := defaults()
		s.set(want)
		t.Run("env "+s.env, func(t *testing.T) {
			got, err := options.Parse(nil, env(map[string]string{s.env: s.value}), io.Discard)
			if err != nil {
				t.Fatalf("Parse() error: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s=%q: mismatch (-want +got):\n%s", s.env, s.value, diff)
			}
		})
		t.Run("flag "+s.flag, func(t *testing.T) {
			got, err := options.Parse([]string{"--" + s.flag + "=" + s.value}, env(nil), io.Discard)
			if err != nil {
				t.Fatalf("Parse() error: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("--%s=%q: mismatch (-want +got):\n%s", s.flag, s.value, diff)
			}
		})
		t.Run("flag wins over env "+s.env, func(t *testing.T) {
			// The environment holds a valid value too, and an invalid one
			// where there is one: neither may be read.
			for _, other := range []string{defaults().Redis.Host, "0", "not valid!"} {
				got, err := options.Parse([]string{"--" + s.flag + "=" + s.value}, env(map[string]string{s.env: other}), io.Discard)
				if err != nil {
					t.Fatalf("%s=%q --%s %q: error: %v", s.env, other, s.flag, s.value, err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s=%q --%s %q: mismatch (-want +got):\n%s", s.env, other, s.flag, s.value, diff)
				}
			}
		})
	}
}

func TestParseEmptyLists(t *testing.T) {
	got, err := options.Parse(nil, env(map[string]string{"IGNORE_CONFIGMAP_NAMESPACES": "", "IGNORE_SECRET_NAMESPACES": " , "}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.IgnoreConfigMapNamespaces) != 0 || len(got.IgnoreSecretNamespaces) != 0 {
		t.Errorf("empty lists gave %q and %q, want none", got.IgnoreConfigMapNamespaces, got.IgnoreSecretNamespaces)
	}
}

// TestBareBooleanFlags: a boolean flag given alone means true.
func TestBareBooleanFlags(t *testing.T) {
	for flag, get := range map[string]func(*options.Options) bool{
		"restart-on-create": func(o *options.Options) bool { return o.RestartOnCreate },
		"cronjob-trigger":   func(o *options.Options) bool { return o.CronJobTrigger },
		"dry-run":           func(o *options.Options) bool { return o.DryRun },
		"csi":               func(o *options.Options) bool { return o.CSI },
	} {
		got, err := options.Parse([]string{"--" + flag}, env(nil), io.Discard)
		if err != nil {
			t.Fatalf("--%s alone: %v", flag, err)
		}
		if !get(got) {
			t.Errorf("--%s alone: false, want true", flag)
		}
	}
}

func TestParseLocalConfig(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want *bool
	}{
		{"True", map[string]string{"LOCAL_CONFIG": "True"}, ptr(true)},
		{"False", map[string]string{"LOCAL_CONFIG": "False"}, ptr(false)},
		{"true", map[string]string{"LOCAL_CONFIG": "true"}, ptr(true)},
		{"false", map[string]string{"LOCAL_CONFIG": "false"}, ptr(false)},
		{"1", map[string]string{"LOCAL_CONFIG": "1"}, ptr(true)},
		{"empty", map[string]string{"LOCAL_CONFIG": ""}, nil},
		{"unset", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := options.Parse(nil, env(tt.env), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.LocalConfig); diff != "" {
				t.Errorf("LocalConfig mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseValidAddresses(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", ":9090", "0", "[::1]:8080", "localhost:65535", "0.0.0.0:8080"} {
		got, err := options.Parse(nil, env(map[string]string{"METRICS_ADDR": addr, "HEALTH_ADDR": addr}), io.Discard)
		if err != nil {
			t.Errorf("METRICS_ADDR=HEALTH_ADDR=%q: error: %v", addr, err)
			continue
		}
		if got.MetricsAddr != addr || got.HealthAddr != addr {
			t.Errorf("%q gave %q and %q", addr, got.MetricsAddr, got.HealthAddr)
		}
	}
}

func TestParseErrors(t *testing.T) {
	// Redis settings are checked in the redis mode only: these rows run in
	// it (see TestRedisSettingsOnlyInRedisMode for the other modes).
	redis := map[string]bool{"LOCK_EXPIRATION_TIME": true, "REDIS_SOCKET_TIMEOUT": true, "DB": true, "REDIS_PORT": true, "REDIS_HOST": true}
	tests := []struct {
		name, env, value string
		want             []string // substrings of the error: the name, the expected form
	}{
		{"LOCK_EXPIRATION_TIME not a number", "LOCK_EXPIRATION_TIME", "abc", []string{"LOCK_EXPIRATION_TIME", `"abc"`, "whole number of seconds"}},
		{"LOCK_EXPIRATION_TIME zero", "LOCK_EXPIRATION_TIME", "0", []string{"LOCK_EXPIRATION_TIME", "seconds from 1 to"}},
		{"LOCK_EXPIRATION_TIME Go duration", "LOCK_EXPIRATION_TIME", "300s", []string{"LOCK_EXPIRATION_TIME", "whole number of seconds"}},
		{"REDIS_SOCKET_TIMEOUT zero", "REDIS_SOCKET_TIMEOUT", "0", []string{"REDIS_SOCKET_TIMEOUT", "seconds from 1 to"}},
		{"DB negative", "DB", "-1", []string{"DB", "Redis database number"}},
		{"REDIS_PORT too large", "REDIS_PORT", "70000", []string{"REDIS_PORT", "TCP port", "1 to 65535"}},
		{"REDIS_PORT zero", "REDIS_PORT", "0", []string{"REDIS_PORT", "TCP port"}},
		{"REDIS_PORT not a number", "REDIS_PORT", "x", []string{"REDIS_PORT", `"x"`, "TCP port"}},
		{"REDIS_PORT link without port", "REDIS_PORT", "tcp://10.0.0.1", []string{"REDIS_PORT", "TCP port", "tcp://host:port"}},
		{"CACHE_SYNC_TIMEOUT zero", "CACHE_SYNC_TIMEOUT", "0", []string{"CACHE_SYNC_TIMEOUT", "--cache-sync-timeout", "greater than 0"}},
		{"CACHE_SYNC_TIMEOUT seconds", "CACHE_SYNC_TIMEOUT", "600", []string{"CACHE_SYNC_TIMEOUT", "duration"}},
		{"PRINT_TIME negative", "PRINT_TIME", "-1", []string{"PRINT_TIME", "seconds from 0 to"}},
		{"LOG_FORMAT", "LOG_FORMAT", "xml", []string{"LOG_FORMAT", "text, json"}},
		{"DISCOVERY", "DISCOVERY", "opt-in", []string{"DISCOVERY", "all, annotated"}},
		{"LOG_LEVEL", "LOG_LEVEL", "verbose", []string{"LOG_LEVEL", "debug, info, error"}},
		{"WORKERS zero", "WORKERS", "0", []string{"WORKERS", "number of workers"}},
		{"RESTART_STRATEGY", "RESTART_STRATEGY", "restartAt", []string{"RESTART_STRATEGY", "annotation, env"}},
		{"RESTART_BUDGET no period", "RESTART_BUDGET", "5", []string{"RESTART_BUDGET", `"5"`, `"5/1h"`, `"0" to turn it off`}},
		{"RESTART_BUDGET bad period", "RESTART_BUDGET", "5/hour", []string{"RESTART_BUDGET", "count and a duration"}},
		{"FLAP_THRESHOLD zero count", "FLAP_THRESHOLD", "0/10m", []string{"FLAP_THRESHOLD", "count from 1"}},
		{"FLAP_QUIET zero", "FLAP_QUIET", "0", []string{"FLAP_QUIET", "--flap-quiet", "greater than 0"}},
		{"MAX_CONCURRENT_ROLLOUTS negative", "MAX_CONCURRENT_ROLLOUTS", "-1", []string{"MAX_CONCURRENT_ROLLOUTS", "number of rollouts"}},
		{"ROLLOUT_TIMEOUT zero", "ROLLOUT_TIMEOUT", "0", []string{"ROLLOUT_TIMEOUT", "--rollout-timeout", "greater than 0"}},
		{"ON_FAILED_ROLLOUT", "ON_FAILED_ROLLOUT", "stop", []string{"ON_FAILED_ROLLOUT", "hold, continue"}},
		{"KUBE_API_QPS zero", "KUBE_API_QPS", "0", []string{"KUBE_API_QPS", "greater than 0"}},
		{"KUBE_API_BURST zero", "KUBE_API_BURST", "0", []string{"KUBE_API_BURST", "burst size"}},
		{"COALESCE negative", "COALESCE", "-1s", []string{"COALESCE", "duration"}},
		{"COALESCE seconds", "COALESCE", "5", []string{"COALESCE", "duration"}},
		{"RESTART_ON_CREATE", "RESTART_ON_CREATE", "yes", []string{"RESTART_ON_CREATE", "True or False"}},
		{"CRONJOB_TRIGGER", "CRONJOB_TRIGGER", "on", []string{"CRONJOB_TRIGGER", "True or False"}},
		{"LOCAL_CONFIG", "LOCAL_CONFIG", "maybe", []string{"LOCAL_CONFIG", "True, False or empty"}},
		{"WORKLOAD_SELECTOR", "WORKLOAD_SELECTOR", "app in (", []string{"WORKLOAD_SELECTOR", "--workload-selector", "label selector"}},
		{"CONFIG_SELECTOR", "CONFIG_SELECTOR", "=x", []string{"CONFIG_SELECTOR", "--config-selector", "label selector"}},
		{"ANNOTATION", "ANNOTATION", "not a key!", []string{"ANNOTATION", "--annotation", "annotation key"}},
		{"ANNOTATION two slashes", "ANNOTATION", "a/b/c", []string{"ANNOTATION", "annotation key"}},
		{"NAMESPACES", "NAMESPACES", "ok,Not_OK", []string{"NAMESPACES", `"Not_OK"`, "not a namespace name"}},
		{"IGNORE_CONFIGMAP_NAMESPACES", "IGNORE_CONFIGMAP_NAMESPACES", "kube.system", []string{"IGNORE_CONFIGMAP_NAMESPACES", "namespace name"}},
		{"IGNORE_SECRET_NAMESPACES", "IGNORE_SECRET_NAMESPACES", "-x", []string{"IGNORE_SECRET_NAMESPACES", "namespace name"}},
		{"METRICS_ADDR", "METRICS_ADDR", "nonsense", []string{"METRICS_ADDR", "--metrics-addr", "host:port"}},
		{"METRICS_ADDR bad port", "METRICS_ADDR", ":99999", []string{"METRICS_ADDR", "host:port"}},
		{"HEALTH_ADDR", "HEALTH_ADDR", "localhost:", []string{"HEALTH_ADDR", "host:port"}},
		{"REDIS_HOST empty", "REDIS_HOST", "", []string{"REDIS_HOST", "host name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := map[string]string{tt.env: tt.value, "PASSWORD": password}
			if redis[tt.env] {
				e["LOCK_BACKEND"] = "redis"
			}
			got, err := options.Parse(nil, env(e), io.Discard)
			if err == nil {
				t.Fatalf("%s=%q: Parse() = %+v, want an error", tt.env, tt.value, got)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s=%q: error %q does not contain %q", tt.env, tt.value, err, w)
				}
			}
			if strings.Contains(err.Error(), password) {
				t.Errorf("error contains the password: %q", err)
			}
		})
	}
}

func TestParseReportsEveryError(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
	}{
		{"values", map[string]string{"DB": "-1", "REDIS_PORT": "x", "LOG_FORMAT": "xml", "LOCK_EXPIRATION_TIME": "abc", "LOCK_BACKEND": "redis"}},
		{"validation", map[string]string{"WORKLOAD_SELECTOR": "app in (", "ANNOTATION": "a b", "NAMESPACES": "A", "METRICS_ADDR": "nonsense", "HEALTH_ADDR": "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.env["PASSWORD"] = password
			_, err := options.Parse(nil, env(tt.env), io.Discard)
			if err == nil {
				t.Fatal("Parse() succeeded, want an error")
			}
			for name := range tt.env {
				if name != "PASSWORD" && name != "LOCK_BACKEND" && !strings.Contains(err.Error(), name) {
					t.Errorf("error does not report %s: %q", name, err)
				}
			}
			if strings.Contains(err.Error(), password) {
				t.Errorf("error contains the password: %q", err)
			}
		})
	}
}

func TestParseArguments(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"positional argument", []string{"extra"}, []string{`unexpected argument "extra"`}},
		{"unknown flag", []string{"--nope"}, []string{"nope"}},
		{"invalid flag value", []string{"--kube-api-burst", "0"}, []string{"kube-api-burst", "burst size"}},
		{"invalid Redis flag value", []string{"--lock=redis", "--redis-port", "70000"}, []string{"--redis-port", `"70000"`, "TCP port"}},
		{"password flag without value", []string{"--redis-password"}, []string{"redis-password"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := options.Parse(tt.args, env(nil), io.Discard)
			if err == nil {
				t.Fatal("Parse() succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"--redis-password", password, "--help"}} {
		var out bytes.Buffer
		_, err := options.Parse(args, env(map[string]string{"PASSWORD": password}), &out)
		if !errors.Is(err, options.ErrHelp) {
			t.Fatalf("Parse(%q) error = %v, want ErrHelp", args, err)
		}
		usage := out.String()
		if strings.Contains(usage, password) {
			t.Errorf("Parse(%q) usage contains the password:\n%s", args, usage)
		}
		flags := map[string]string{"kubeconfig": "KUBECONFIG",
			"redis-sentinel-master": "REDIS_SENTINEL_MASTER", "redis-sentinel-addrs": "REDIS_SENTINEL_ADDRS"}
		for flag, envName := range alertSwitches { // valid only with a URL: see TestAlertSettings
			flags[flag] = envName
		}
		for _, s := range settings {
			flags[s.flag] = s.env
		}
		for flag, envName := range flags {
			re := regexp.MustCompile(`(?m)^  --` + flag + ` \S+\n +env ` + envName + `, default `)
			if !re.MatchString(usage) {
				t.Errorf("usage does not list --%s with env %s:\n%s", flag, envName, usage)
			}
		}
		if n := strings.Count(usage, "\n  --"); n != len(flags) {
			t.Errorf("usage lists %d flags, want %d", n, len(flags))
		}
		for _, line := range []string{
			"env REDIS_HOST, default redis-stack-0.redis-service.watcher.svc.cluster.local",
			"env PASSWORD, default none",
			"env PRINT_TIME, default 100",
			"env IGNORE_SECRET_NAMESPACES, default ingress-aws-lb-controller,istio-system,karpenter,kube-system,kubesphere-system",
		} {
			if !strings.Contains(usage, line) {
				t.Errorf("usage lacks %q", line)
			}
		}
	}
}

// TestLockModeDefault: REDIS_HOST alone (existing deployments of this
// design) selects the redis mode; --lock or LOCK_BACKEND win over it.
func TestLockModeDefault(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"nothing set", nil, nil, "lease"},
		{"REDIS_HOST set", nil, map[string]string{"REDIS_HOST": "redis"}, "redis"},
		{"REDIS_HOST set empty-handed", nil, map[string]string{"REDIS_HOST": "redis", "REDIS_PORT": "6380"}, "redis"},
		{"only REDIS_PORT", nil, map[string]string{"REDIS_PORT": "6380"}, "lease"},
		{"--redis-host", []string{"--redis-host=redis"}, nil, "redis"},
		{"--lock wins", []string{"--lock=lease"}, map[string]string{"REDIS_HOST": "redis"}, "lease"},
		{"LOCK_BACKEND wins", nil, map[string]string{"REDIS_HOST": "redis", "LOCK_BACKEND": "none"}, "none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := options.Parse(tt.args, env(tt.env), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if o.Lock != tt.want {
				t.Errorf("Lock = %q, want %q", o.Lock, tt.want)
			}
		})
	}
}

func TestSentinelAndLeaseValidation(t *testing.T) {
	for name, e := range map[string]map[string]string{
		"master without addresses":  {"REDIS_SENTINEL_MASTER": "mymaster", "LOCK_BACKEND": "redis"},
		"addresses without master":  {"REDIS_SENTINEL_ADDRS": "s1:26379", "LOCK_BACKEND": "redis"},
		"address without port":      {"REDIS_SENTINEL_MASTER": "m", "REDIS_SENTINEL_ADDRS": "s1", "LOCK_BACKEND": "redis"},
		"renew deadline > duration": {"LEASE_RENEW_DEADLINE": "20s"},
		"retry period > renew":      {"LEASE_RETRY_PERIOD": "11s"},
		"missing CA file":           {"REDIS_TLS_CA_FILE": "/nonexistent/ca.pem", "REDIS_HOST": "redis"},
		"invalid lease name":        {"LEASE_NAME": "Not_A_Name"},
		"invalid lock":              {"LOCK_BACKEND": "zookeeper"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := options.Parse(nil, env(e), io.Discard); err == nil {
				t.Errorf("%v: no error", e)
			}
		})
	}
}
