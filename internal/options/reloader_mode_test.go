package options_test

import (
	"io"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/watcher-dev/watcher/internal/options"
)

// view is what the precedence rules of Reloader's flags decide.
type view struct {
	Discovery, Strategy                       string
	IgnoreConfigMaps, IgnoreSecrets           []string
	Namespaces                                []string
	NamespaceSelector, ConfigSelector         string
	CSI, DryRun, OnReload, MetricsByNamespace bool
	RestartOnCreate, ReloadOnDelete           bool
	Sink, WebhookURL, PprofAddr               string
	Namespace, ReloaderAddr                   string
	Lease                                     options.Lease
}

func viewOf(o *options.Options) view {
	return view{
		Discovery: o.Discovery, Strategy: o.RestartStrategy,
		IgnoreConfigMaps: o.IgnoreConfigMapNamespaces, IgnoreSecrets: o.IgnoreSecretNamespaces,
		Namespaces: o.Namespaces, NamespaceSelector: o.NamespaceSelector, ConfigSelector: o.ConfigSelector,
		CSI: o.CSI, DryRun: o.DryRun, OnReload: o.Alert.OnReload, MetricsByNamespace: o.MetricsByNamespace,
		RestartOnCreate: o.RestartOnCreate, ReloadOnDelete: o.ReloadOnDelete,
		Sink: o.Alert.Sink, WebhookURL: o.Alert.WebhookURL, PprofAddr: o.PprofAddr,
		Namespace: o.Namespace, ReloaderAddr: o.ReloaderAddr, Lease: o.Lease,
	}
}

// watcherChartEnv is the environment of watcher's own chart and manifest,
// with alerts to Slack.
var watcherChartEnv = map[string]string{
	"POD_NAMESPACE": "watcher", "DISCOVERY": "all", "RESTART_STRATEGY": "annotation",
	"IGNORE_CONFIGMAP_NAMESPACES": "ingress-aws-lb-controller,istio-system,karpenter,kube-system,kubesphere-system",
	"IGNORE_SECRET_NAMESPACES":    "ingress-aws-lb-controller,istio-system,karpenter,kube-system,kubesphere-system",
	"RELOAD_ON_CREATE":            "false", "RELOAD_ON_DELETE": "false", "DRY_RUN": "false", "CSI": "false",
	"ALERT_ON_RELOAD": "false", "ALERT_SINK": "slack", "ALERT_WEBHOOK_URL": hookURL,
	"LEASE_DURATION": "15s", "LEASE_RENEW_DEADLINE": "10s", "LEASE_RETRY_PERIOD": "2s", "PPROF_ADDR": "0",
}

// reloaderChartEnv is the environment Reloader's own chart gives its
// Deployment (watchGlobally: false, enableHA, enableMetricsByNamespace).
var reloaderChartEnv = map[string]string{
	"GOMAXPROCS": "1", "GOMEMLIMIT": "536870912", "KUBERNETES_NAMESPACE": "reloader",
	"RELOADER_NAMESPACE": "reloader", "RELOADER_DEPLOYMENT_NAME": "reloader-reloader",
	"POD_NAME": "reloader-reloader-7d9f-x2x", "POD_NAMESPACE": "reloader", "METRICS_COUNT_BY_NAMESPACE": "enabled",
}

func without(base map[string]string, keys ...string) map[string]string {
	m := maps.Clone(base)
	for _, k := range keys {
		delete(m, k)
	}
	return m
}

// TestReloaderPrecedence: a flag on the command line, watcher's or
// Reloader's, wins over the environment, and a Reloader flag gives way
// only to watcher's own flag on the command line; each variable
// overridden is noted by name, never by value. Reloader mode (a Reloader
// flag, or RELOADER_NAMESPACE) brings Reloader's defaults.
func TestReloaderPrecedence(t *testing.T) {
	chart := viewOf(mustParse(t, nil, watcherChartEnv))
	none := []string(nil)
	tests := []struct {
		name  string
		args  []string
		env   map[string]string
		base  view // zero: the view of watcher's chart
		want  func(*view)
		notes []string // each in some note
	}{
		{name: "README's migration arguments over watcher's chart", args: []string{"--reload-strategy=annotations", "--namespaces-to-ignore=kube-system"}, env: watcherChartEnv,
			want: func(v *view) {
				v.Discovery, v.Strategy = "annotated", "annotation"
				v.IgnoreConfigMaps, v.IgnoreSecrets = []string{"kube-system"}, []string{"kube-system"}
			},
			notes: []string{"DISCOVERY (environment) overridden", "IGNORE_CONFIGMAP_NAMESPACES (environment) overridden by Reloader's --namespaces-to-ignore", "IGNORE_SECRET_NAMESPACES"}},
		{name: "env-vars over RESTART_STRATEGY", args: []string{"--reload-strategy=env-vars"}, env: watcherChartEnv,
			want: func(v *view) {
				v.Discovery, v.Strategy, v.IgnoreConfigMaps, v.IgnoreSecrets = "annotated", "env", none, none
			},
			notes: []string{"RESTART_STRATEGY (environment) overridden by Reloader's --reload-strategy", "Reloader's default: no namespace ignored"}},
		{name: "CSI over CSI=false", args: []string{"--enable-csi-integration"}, env: watcherChartEnv,
			want: func(v *view) {
				v.CSI, v.Discovery, v.IgnoreConfigMaps, v.IgnoreSecrets = true, "annotated", none, none
			},
			notes: []string{"CSI (environment) overridden by Reloader's --enable-csi-integration"}},
		{name: "webhook-url over DRY_RUN and ALERT_*", args: []string{"--webhook-url=http://x"}, env: watcherChartEnv,
			want: func(v *view) {
				v.DryRun, v.OnReload, v.Sink, v.WebhookURL = true, true, "webhook", "http://x"
				v.Discovery, v.IgnoreConfigMaps, v.IgnoreSecrets = "annotated", none, none
			},
			notes: []string{"DRY_RUN (environment) overridden", "ALERT_ON_RELOAD (environment)", "ALERT_SINK (environment)", "ALERT_WEBHOOK_URL (environment)"}},
		{name: "watcher's flags on the command line win", args: []string{"--auto-reload-all=false", "--discovery=all", "--ignore-secret-namespaces=kube-system", "--reload-strategy", "env-vars", "--restart-strategy=evict"}, env: watcherChartEnv,
			want: func(v *view) {
				v.Strategy, v.IgnoreConfigMaps, v.IgnoreSecrets = "evict", none, []string{"kube-system"}
			}},
		{name: "auto-reload-all over DISCOVERY", args: []string{"--auto-reload-all"}, env: with(nil, "DISCOVERY", "annotated"), base: viewOf(options.Defaults()),
			want:  func(v *view) { v.IgnoreConfigMaps, v.IgnoreSecrets = none, none },
			notes: []string{"DISCOVERY (environment) overridden by Reloader's --auto-reload-all"}},
		{name: "Reloader's chart, no arguments", env: reloaderChartEnv, base: viewOf(options.Defaults()),
			want: func(v *view) {
				v.Discovery, v.Namespaces, v.IgnoreConfigMaps, v.IgnoreSecrets = "annotated", []string{"reloader"}, none, none
				v.Namespace, v.ReloaderAddr, v.MetricsByNamespace = "reloader", ":9090", true
			},
			notes: []string{"KUBERNETES_NAMESPACE: watching namespace reloader alone"}},
		{name: "Reloader's chart, global, namespace from RELOADER_NAMESPACE", env: without(reloaderChartEnv, "KUBERNETES_NAMESPACE", "POD_NAMESPACE", "METRICS_COUNT_BY_NAMESPACE"), base: viewOf(options.Defaults()),
			want: func(v *view) {
				v.Discovery, v.IgnoreConfigMaps, v.IgnoreSecrets, v.Namespace, v.ReloaderAddr = "annotated", none, none, "reloader", ":9090"
			}},
		{name: "RELOADER_NAMESPACE alone: watcher's variables win over Reloader's defaults", env: with(nil, "RELOADER_NAMESPACE", "r", "DISCOVERY", "all", "IGNORE_SECRET_NAMESPACES", "a", "RELOADER_ADDR", "0", "METRICS_BY_NAMESPACE", "false", "METRICS_COUNT_BY_NAMESPACE", "enabled"), base: viewOf(options.Defaults()),
			want: func(v *view) { v.IgnoreConfigMaps, v.IgnoreSecrets, v.Namespace = none, []string{"a"}, "r" }},
		{name: "KUBERNETES_NAMESPACE gives way to NAMESPACES", env: with(reloaderChartEnv, "NAMESPACES", "a,b"), base: viewOf(options.Defaults()),
			want: func(v *view) {
				v.Discovery, v.Namespaces, v.IgnoreConfigMaps, v.IgnoreSecrets = "annotated", []string{"a", "b"}, none, none
				v.Namespace, v.ReloaderAddr, v.MetricsByNamespace = "reloader", ":9090", true
			}},
		{name: "KUBERNETES_NAMESPACE in watcher's own mode", env: with(nil, "KUBERNETES_NAMESPACE", "team"), base: viewOf(options.Defaults()),
			want: func(v *view) { v.Namespaces = []string{"team"} }},
		{name: "scoped: --namespaces-to-ignore and --namespace-selector ignored", args: []string{"--namespaces=a", "--namespaces", "b", "--namespaces-to-ignore=kube-system", `--namespace-selector="team:a"`}, env: watcherChartEnv,
			want: func(v *view) {
				v.Discovery, v.Namespaces, v.IgnoreConfigMaps, v.IgnoreSecrets = "annotated", []string{"a", "b"}, none, none
			},
			notes: []string{"--namespaces-to-ignore ignored, as Reloader does when it watches only a,b", "--namespace-selector ignored"}},
		{name: "single namespace: --namespace-selector ignored", args: []string{`--namespace-selector="team:a"`}, env: reloaderChartEnv, base: viewOf(options.Defaults()),
			want: func(v *view) {
				v.Discovery, v.Namespaces, v.IgnoreConfigMaps, v.IgnoreSecrets = "annotated", []string{"reloader"}, none, none
				v.Namespace, v.ReloaderAddr, v.MetricsByNamespace = "reloader", ":9090", true
			},
			notes: []string{"--namespace-selector ignored"}},
		{name: "global: quoted selectors as Reloader's chart renders them", args: []string{`--namespace-selector="team:a,env:*"`, `--resource-label-selector="reloader:on"`}, env: with(nil, "RELOADER_NAMESPACE", "r"), base: viewOf(options.Defaults()),
			want: func(v *view) {
				v.Discovery, v.IgnoreConfigMaps, v.IgnoreSecrets, v.Namespace, v.ReloaderAddr = "annotated", none, none, "r", ":9090"
				v.NamespaceSelector, v.ConfigSelector = "team=a,env", "reloader=on"
			}},
		{name: "leader election", args: []string{"--enable-ha=true", "--leader-election-lease-duration=30s", "--leader-election-renew-deadline", "20s", "--leader-election-retry-period="}, env: watcherChartEnv,
			want: func(v *view) {
				v.Discovery, v.IgnoreConfigMaps, v.IgnoreSecrets = "annotated", none, none
				v.Lease.Duration, v.Lease.RenewDeadline = 30*time.Second, 20*time.Second
			},
			notes: []string{"LEASE_DURATION (environment) overridden by Reloader's --leader-election-lease-duration", "LEASE_RENEW_DEADLINE"}},
		{name: "watcher's lease flag wins", args: []string{"--leader-election-lease-duration=30s", "--lease-duration=20s"}, env: watcherChartEnv,
			want: func(v *view) {
				v.Discovery, v.IgnoreConfigMaps, v.IgnoreSecrets, v.Lease.Duration = "annotated", none, none, 20*time.Second
			}},
		{name: "boolean flags with a separate value", args: []string{"--reload-on-create", "true", "--reload-on-delete", "false", "--is-Argo-Rollouts", "true", "--enable-ha", "true", "--auto-reload-all", "true", "--enable-csi-integration", "true", "--enable-pprof", "true", "--sync-after-restart", "true"}, env: watcherChartEnv,
			want: func(v *view) {
				v.RestartOnCreate, v.CSI, v.PprofAddr, v.IgnoreConfigMaps, v.IgnoreSecrets = true, true, ":6060", none, none
			},
			notes: []string{"PPROF_ADDR (environment) overridden by Reloader's --enable-pprof", "--enable-ha accepted"}},
		{name: "a false word after a boolean of Reloader's", args: []string{"--auto-reload-all", "false", "--reload-on-create", "1"}, env: nil, base: viewOf(options.Defaults()),
			want: func(v *view) {
				v.Discovery, v.RestartOnCreate, v.IgnoreConfigMaps, v.IgnoreSecrets = "annotated", true, none, none
			},
			notes: []string{"--auto-reload-all false read as --auto-reload-all=false; Reloader itself reads --auto-reload-all alone, as true"}},
		{name: "--reload-on-create wins over RESTART_ON_CREATE", args: []string{"--reload-on-create=true"}, env: with(nil, "RESTART_ON_CREATE", "false"), base: viewOf(options.Defaults()),
			want: func(v *view) { v.RestartOnCreate = true }},
		{name: "enable-pprof=false over PPROF_ADDR", args: []string{"--enable-pprof=false"}, env: with(nil, "PPROF_ADDR", ":7000"), base: viewOf(options.Defaults()),
			want: func(v *view) { v.Discovery, v.IgnoreConfigMaps, v.IgnoreSecrets = "annotated", none, none }},
		{name: "ALERT_SINK raw", env: with(watcherChartEnv, "ALERT_SINK", "raw"),
			want:  func(v *view) { v.Sink = "webhook" },
			notes: []string{`alert sink "raw" read as webhook`}},
		{name: "ALERT_SINK unknown", env: with(nil, "ALERT_SINK", "PagerDuty", "ALERT_ON_RELOAD", "true", "ALERT_WEBHOOK_URL", hookURL), base: viewOf(options.Defaults()),
			want:  func(v *view) { v.OnReload, v.WebhookURL = true, hookURL },
			notes: []string{`alert sink "pagerduty" read as webhook`}},
		{name: "--alert-sink raw", args: []string{"--alert-sink", "raw"}, env: with(watcherChartEnv, "ALERT_SINK", "teams"),
			want: func(v *view) { v.Sink = "webhook" }},
		{name: "METRICS_COUNT_BY_NAMESPACE other than enabled", env: with(nil, "METRICS_COUNT_BY_NAMESPACE", "true"), base: viewOf(options.Defaults())},
		{name: "--metrics-by-namespace wins", args: []string{"--metrics-by-namespace=false", "--reloader-addr=:9999", "--lease-namespace=w"}, env: reloaderChartEnv, base: viewOf(options.Defaults()),
			want: func(v *view) {
				v.Discovery, v.Namespaces, v.IgnoreConfigMaps, v.IgnoreSecrets = "annotated", []string{"reloader"}, none, none
				v.Namespace, v.ReloaderAddr = "w", ":9999"
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := mustParse(t, tt.args, tt.env)
			want := tt.base
			if tt.base.Discovery == "" {
				want = chart
			}
			if tt.want != nil {
				tt.want(&want)
			}
			if diff := cmp.Diff(want, viewOf(o)); diff != "" {
				t.Errorf("Parse(%q) mismatch (-want +got):\n%s", tt.args, diff)
			}
			all := strings.Join(o.Notes, "\n")
			for _, n := range tt.notes {
				if !strings.Contains(all, n) {
					t.Errorf("notes lack %q:\n%s", n, all)
				}
			}
			if strings.Contains(all, hookURL) || strings.Contains(all, "http://x") {
				t.Errorf("notes show a webhook URL:\n%s", all)
			}
		})
	}
}

func mustParse(t *testing.T, args []string, e map[string]string) *options.Options {
	t.Helper()
	o, err := options.Parse(args, env(e), io.Discard)
	if err != nil {
		t.Fatalf("Parse(%q): %v", args, err)
	}
	return o
}

// reloaderFlagValues are the flags of Reloader's ConfigureReloaderFlags
// (internal/pkg/util at v1.4.21), its leader-election flags, and a value
// of each; the booleans are those Reloader declares as such.
var reloaderFlagValues = []struct {
	flag, value string
	boolean     bool
}{
	{"auto-reload-all", "true", true},
	{"configmap-annotation", "example.com/cm", false},
	{"secret-annotation", "example.com/s", false},
	{"auto-annotation", "example.com/auto", false},
	{"ignore-annotation", "example.com/ignore", false},
	{"configmap-auto-annotation", "example.com/cm-auto", false},
	{"secret-auto-annotation", "example.com/s-auto", false},
	{"auto-search-annotation", "example.com/search", false},
	{"search-match-annotation", "example.com/match", false},
	{"pause-deployment-annotation", "example.com/pause", false},
	{"pause-deployment-time-annotation", "example.com/paused-at", false},
	{"log-format", "json", false},
	{"log-level", "warning", false},
	{"webhook-url", "https://hooks.example/x", false},
	{"resources-to-ignore", "secrets", false},
	{"ignored-workload-types", "jobs,cronjobs", false},
	{"namespaces", "a,b", false},
	{"namespaces-to-ignore", "kube-system", false},
	{"namespace-selector", `"team:a"`, false},
	{"resource-label-selector", "reloader:enabled", false},
	{"is-Argo-Rollouts", "true", false},
	{"reload-strategy", "annotations", false},
	{"reload-on-create", "true", false},
	{"reload-on-delete", "false", false},
	{"enable-ha", "true", true},
	{"sync-after-restart", "true", true},
	{"enable-pprof", "true", true},
	{"pprof-addr", ":6061", false},
	{"enable-csi-integration", "true", true},
	{"leader-election-lease-duration", "30s", false},
	{"leader-election-renew-deadline", "12s", false},
	{"leader-election-retry-period", "3s", false},
}

// TestReloaderFlagForms: every flag of Reloader's is accepted as
// --flag=value and as --flag value, with the same result, in Reloader's
// chart environment too; a boolean of Reloader's alone is true.
func TestReloaderFlagForms(t *testing.T) {
	for _, f := range reloaderFlagValues {
		for name, e := range map[string]map[string]string{"no environment": nil, "Reloader's chart": reloaderChartEnv, "watcher's chart": watcherChartEnv} {
			t.Run(f.flag+" "+name, func(t *testing.T) {
				joined := mustParse(t, []string{"--" + f.flag + "=" + f.value}, e)
				spaced := mustParse(t, []string{"--" + f.flag, f.value, "--log-level", "info"}, e)
				joined.LogLevel = "info"
				if diff := cmp.Diff(joined, spaced); diff != "" {
					t.Errorf("--%s=%s and --%s %s differ (-joined +spaced):\n%s", f.flag, f.value, f.flag, f.value, diff)
				}
				if f.boolean {
					alone := mustParse(t, []string{"--" + f.flag}, e)
					if diff := cmp.Diff(joined, alone); diff != "" {
						t.Errorf("--%s=true and --%s differ (-true +alone):\n%s", f.flag, f.flag, diff)
					}
				}
			})
		}
	}
}

// TestWatcherBooleansTakeAValue: watcher's own booleans take a separate
// value too; a word that is no boolean stays an argument, an error.
func TestWatcherBooleansTakeAValue(t *testing.T) {
	o := mustParse(t, []string{"--dry-run", "true", "--csi", "false", "--cronjob-trigger", "1"}, with(nil, "CSI", "true"))
	if !o.DryRun || o.CSI || !o.CronJobTrigger {
		t.Errorf("dry-run %t, csi %t, cronjob-trigger %t: want true, false, true", o.DryRun, o.CSI, o.CronJobTrigger)
	}
	if _, err := options.Parse([]string{"--dry-run", "yes"}, env(nil), io.Discard); err == nil || !strings.Contains(err.Error(), `unexpected argument "yes"`) {
		t.Errorf("--dry-run yes: error %v, want an unexpected argument", err)
	}
	if _, err := options.Parse([]string{"--leader-election-lease-duration=soon"}, env(nil), io.Discard); err == nil || !strings.Contains(err.Error(), "--leader-election-lease-duration") {
		t.Errorf("--leader-election-lease-duration=soon: error %v, want one naming the flag", err)
	}
}
