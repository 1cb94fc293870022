package options

import (
	"github.com/spf13/pflag"

	"github.com/watcher-dev/watcher/internal/envflag"
	"github.com/watcher-dev/watcher/internal/optin"
)

// Stakater Reloader's command-line flags (internal/pkg/util at v1.4.21,
// and the leader-election flags after it), so that a Reloader Deployment
// keeps its arguments and environment when its image is replaced by
// watcher's. Each is mapped onto watcher's own setting; no behaviour is
// implemented twice. Every flag takes its value as --flag=value or
// --flag value, booleans included (--reload-on-create true, --enable-ha
// true; a boolean alone is true).
//
// Precedence: a flag on the command line, watcher's or Reloader's, wins
// over every environment variable; a Reloader flag gives way only to
// watcher's own flag for the same setting on the command line. Each
// environment variable so overridden is named in Options.Notes (never its
// value). Reloader mode is any Reloader flag on the command line, or
// RELOADER_NAMESPACE in the environment (Reloader's chart always sets it):
// then Reloader's defaults replace watcher's where the table says so. With
// RELOADER_NAMESPACE alone, watcher's own variables still win over those
// defaults (they are no flag on the command line).
//
//	Reloader's                          watcher
//	Reloader mode, no --auto-reload-all --discovery annotated
//	--auto-reload-all                   --discovery all
//	--reload-strategy env-vars          --restart-strategy env
//	--reload-strategy annotations       --restart-strategy annotation
//	Reloader mode                       --ignore-configmap-namespaces and
//	                                    --ignore-secret-namespaces: exactly
//	                                    --namespaces-to-ignore (none by
//	                                    default, not watcher's five)
//	--namespaces (watcher's flag too)   scoped mode: those namespaces
//	KUBERNETES_NAMESPACE (any mode)     --namespaces that one, unless
//	                                    --namespaces or NAMESPACES is given
//	scoped or single-namespace in       --namespaces-to-ignore and
//	Reloader mode                       --namespace-selector ignored, noted
//	                                    (as Reloader's resolveWatchNamespaces)
//	--namespace-selector (watcher's     its key:value and key:* forms, and
//	flag too)                           "k:v" in literal double quotes as
//	                                    Reloader's chart renders it
//	--resources-to-ignore configmaps    --ignore-configmap-namespaces '*'
//	--resources-to-ignore secrets       --ignore-secret-namespaces '*'
//	--ignored-workload-types jobs,      --ignore-workload-kinds Job,
//	cronjobs                            CronJob
//	--resource-label-selector           --config-selector (k:v, k:* and
//	                                    quoted forms converted)
//	--enable-pprof                      --pprof-addr (:6060 unless given);
//	                                    --enable-pprof=false: "0"
//	--enable-csi-integration[=false]    --csi [false]
//	--webhook-url                       --dry-run, --alert-on-reload,
//	                                    --alert-sink webhook and
//	                                    --alert-webhook-url: each restart
//	                                    posted, none made
//	--leader-election-lease-duration,   --lease-duration,
//	-renew-deadline, -retry-period      --lease-renew-deadline,
//	                                    --lease-retry-period (empty: kept)
//	the annotation key flags            --annotation-keys: the key given
//	                                    is read in place of Reloader's
//	                                    (optin.Keys)
//	--enable-ha, --is-Argo-Rollouts,    noted: watcher does it by default
//	--sync-after-restart,               (lease election; Rollouts followed
//	--pause-deployment-time-annotation  while served; changes made while
//	                                    down are caught from the recorded
//	                                    hashes; pauses are kept in the
//	                                    cluster, not in this annotation)
//	--reload-on-create, --reload-on-    watcher's flags of the same names;
//	delete, --log-format, --log-level,  --log-level's trace, warning,
//	--pprof-addr                        fatal and panic mapped
//	RELOADER_NAMESPACE                  watcher's own namespace unless
//	                                    POD_NAMESPACE or --lease-namespace;
//	                                    --reloader-addr :9090 unless given
//	METRICS_COUNT_BY_NAMESPACE=enabled  --metrics-by-namespace, unless it
//	                                    or METRICS_BY_NAMESPACE is given
//	ALERT_SINK raw, or unknown          --alert-sink webhook, noted
//
// No flag of Reloader's stops watcher; a value it cannot read does, with a
// message naming the flag.
type reloaderFlags struct {
	autoReloadAll    bool
	strategy         string
	namespacesIgnore []string
	resourcesIgnore  []string
	workloadsIgnore  []string
	resourceSelector []string
	enablePprof      bool
	webhookURL       string
	csi              bool
	keys             map[string]*string
	noted            map[string]*string
	// leaderElection holds the leader-election flags by the name of
	// watcher's flag they map to.
	leaderElection map[string]*string
}

// reloaderKeys are Reloader's annotation key flags and its defaults,
// which are the keys watcher reads (package optin).
var reloaderKeys = map[string]string{
	"configmap-annotation":        optin.ConfigMapReload,
	"secret-annotation":           optin.SecretReload,
	"auto-annotation":             optin.ReloaderAuto,
	"configmap-auto-annotation":   optin.ConfigMapAuto,
	"secret-auto-annotation":      optin.SecretAuto,
	"auto-search-annotation":      optin.Search,
	"search-match-annotation":     optin.Match,
	"ignore-annotation":           optin.Ignore,
	"pause-deployment-annotation": optin.PausePeriod,
}

// reloaderNoted are Reloader's flags watcher accepts with a remark: what
// they ask for, watcher does anyway.
var reloaderNoted = map[string]string{
	"enable-ha":                        "watcher elects a leader through a Lease by default (--lock lease); several replicas need nothing more",
	"is-Argo-Rollouts":                 "watcher restarts Argo Rollouts whenever the API server serves them",
	"sync-after-restart":               "watcher catches changes made while it was down from the hashes recorded on each workload, and restarts nothing else at start-up",
	"pause-deployment-time-annotation": "watcher keeps the pause of deployment.reloader.stakater.com/pause-period in the cluster itself, not in an annotation",
}

// reloaderLeaderElection maps Reloader's leader-election flags to
// watcher's.
var reloaderLeaderElection = map[string]string{
	"leader-election-lease-duration": "lease-duration",
	"leader-election-renew-deadline": "lease-renew-deadline",
	"leader-election-retry-period":   "lease-retry-period",
}

// bindReloader binds Reloader's flags, hidden from --help (see
// reloaderFlags).
func bindReloader(fs *pflag.FlagSet) *reloaderFlags {
	r := &reloaderFlags{}
	r.keys, r.noted, r.leaderElection = map[string]*string{}, map[string]*string{}, map[string]*string{}
	hidden := func(name string) {
		_ = fs.MarkHidden(name)
		_ = fs.SetAnnotation(name, reloaderAnnotation, []string{"true"})
	}
	fs.Var(envflag.Bool(&r.autoReloadAll), "auto-reload-all", "Reloader's: restart every workload that uses a changed object (watcher's --discovery all)")
	fs.Lookup("auto-reload-all").NoOptDefVal = "true"
	hidden("auto-reload-all")
	fs.Var(envflag.OneOf(&r.strategy, "env-vars", "annotations", "default"), "reload-strategy", "Reloader's: env-vars (watcher's --restart-strategy env) or annotations (annotation)")
	hidden("reload-strategy")
	fs.Var(envflag.Appending(&r.namespacesIgnore), "namespaces-to-ignore", "Reloader's: namespaces ignored (both --ignore-*-namespaces)")
	hidden("namespaces-to-ignore")
	fs.Var(envflag.Appending(&r.resourcesIgnore), "resources-to-ignore", "Reloader's: configmaps and/or secrets, ignored in every namespace")
	hidden("resources-to-ignore")
	fs.Var(envflag.Appending(&r.workloadsIgnore), "ignored-workload-types", "Reloader's: jobs and/or cronjobs")
	hidden("ignored-workload-types")
	fs.Var(envflag.Appending(&r.resourceSelector), "resource-label-selector", "Reloader's: key:value labels of the ConfigMaps and Secrets watched (watcher's --config-selector)")
	hidden("resource-label-selector")
	fs.Var(envflag.Bool(&r.enablePprof), "enable-pprof", "Reloader's: serve pprof at --pprof-addr, :6060 unless given")
	fs.Lookup("enable-pprof").NoOptDefVal = "true"
	hidden("enable-pprof")
	fs.Var(envflag.Secret(&r.webhookURL), "webhook-url", "Reloader's: post each restart to this URL instead of making it (watcher's --dry-run with --alert-on-reload to a webhook sink)")
	hidden("webhook-url")
	fs.Var(envflag.Bool(&r.csi), "enable-csi-integration", "Reloader's: restart on Secrets Store CSI Driver rotations (watcher's --csi)")
	fs.Lookup("enable-csi-integration").NoOptDefVal = "true"
	hidden("enable-csi-integration")
	for name, def := range reloaderKeys {
		v := def
		r.keys[name] = &v
		fs.StringVar(&v, name, def, "Reloader's annotation key (watcher's --annotation-keys)")
		hidden(name)
	}
	// The noted flags only say what watcher does instead.
	for name, what := range reloaderNoted {
		v := ""
		r.noted[name] = &v
		fs.StringVar(&v, name, "", "Reloader's; "+what)
		if reloaderBoolVars[name] {
			fs.Lookup(name).NoOptDefVal = "true"
		}
		hidden(name)
	}
	for name, own := range reloaderLeaderElection {
		v := ""
		r.leaderElection[own] = &v
		fs.StringVar(&v, name, "", "Reloader's: watcher's --"+own+"; empty: unchanged")
		hidden(name)
	}
	return r
}
