package options

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/watcher-dev/watcher/internal/alert"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Stakater Reloader's command-line flags (v1.4, internal/pkg/util), so
// that a Reloader Deployment keeps its arguments when its image is
// replaced by watcher's. Each is mapped onto watcher's own setting; no
// behaviour is implemented twice. Those of them that name a setting of
// watcher's own (--namespaces, --namespace-selector, --reload-on-create,
// --reload-on-delete, --log-format, --log-level, --pprof-addr) are
// watcher's flags, which accept Reloader's values too (--namespace-selector
// its key:value and key:* forms, converted as --resource-label-selector's).
//
//	Reloader's flag                     watcher
//	--auto-reload-all                   --discovery all (else, with any of
//	                                    Reloader's flags or its chart's
//	                                    RELOADER_NAMESPACE, annotated, as
//	                                    Reloader behaves)
//	--reload-strategy env-vars          --restart-strategy env
//	--reload-strategy annotations       --restart-strategy annotation
//	--namespaces-to-ignore              --ignore-configmap-namespaces and
//	                                    --ignore-secret-namespaces
//	--resources-to-ignore configmaps    --ignore-configmap-namespaces '*'
//	--resources-to-ignore secrets       --ignore-secret-namespaces '*'
//	--ignored-workload-types            jobs: --ignore-workload-kinds
//	                                    Job; cronjobs:
//	                                    --ignore-workload-kinds CronJob
//	--resource-label-selector           --config-selector (Reloader's
//	                                    k:v and k:* forms converted)
//	--enable-pprof                      --pprof-addr (:6060 unless given)
//	--enable-ha, --is-Argo-Rollouts,    noted: watcher does it by default
//	--sync-after-restart,               (lease election; Rollouts followed
//	--pause-deployment-time-annotation  while served; changes made while
//	                                    down are caught from the recorded
//	                                    hashes; pauses are kept in the
//	                                    cluster, not in this annotation)
//	the annotation key flags            --annotation-keys: the key given
//	                                    is read in place of Reloader's
//	                                    (optin.Keys)
//	--webhook-url                       --dry-run, --alert-on-reload,
//	                                    --alert-sink webhook and
//	                                    --alert-webhook-url: each restart
//	                                    posted, none made
//	--enable-csi-integration            --csi
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

// reloaderBools are those of Reloader's flags given without a value
// (booleans); the others take the next argument as their value, as in
// Reloader.
var reloaderBools = map[string]bool{"enable-ha": true, "sync-after-restart": true}

// bindReloader binds Reloader's flags, hidden from --help (see
// reloaderFlags).
func bindReloader(fs *pflag.FlagSet) *reloaderFlags {
	r := &reloaderFlags{}
	r.keys, r.noted = map[string]*string{}, map[string]*string{}
	hidden := func(name string) {
		_ = fs.MarkHidden(name)
		fs.SetAnnotation(name, reloaderAnnotation, []string{"true"})
	}
	fs.Var(boolean{&r.autoReloadAll}, "auto-reload-all", "Reloader's: restart every workload that uses a changed object (watcher's --discovery all)")
	fs.Lookup("auto-reload-all").NoOptDefVal = "true"
	hidden("auto-reload-all")
	fs.Var(oneOf{&r.strategy, []string{"env-vars", "annotations", "default"}}, "reload-strategy", "Reloader's: env-vars (watcher's --restart-strategy env) or annotations (annotation)")
	hidden("reload-strategy")
	fs.Var(list{&r.namespacesIgnore}, "namespaces-to-ignore", "Reloader's: namespaces ignored (both --ignore-*-namespaces)")
	hidden("namespaces-to-ignore")
	fs.Var(list{&r.resourcesIgnore}, "resources-to-ignore", "Reloader's: configmaps and/or secrets, ignored in every namespace")
	hidden("resources-to-ignore")
	fs.Var(list{&r.workloadsIgnore}, "ignored-workload-types", "Reloader's: jobs and/or cronjobs")
	hidden("ignored-workload-types")
	fs.Var(list{&r.resourceSelector}, "resource-label-selector", "Reloader's: key:value labels of the ConfigMaps and Secrets watched (watcher's --config-selector)")
	hidden("resource-label-selector")
	fs.Var(boolean{&r.enablePprof}, "enable-pprof", "Reloader's: serve pprof at --pprof-addr, :6060 unless given")
	fs.Lookup("enable-pprof").NoOptDefVal = "true"
	hidden("enable-pprof")
	fs.Var(secret{&r.webhookURL}, "webhook-url", "Reloader's: post each restart to this URL instead of making it (watcher's --dry-run with --alert-on-reload to a webhook sink)")
	hidden("webhook-url")
	fs.Var(boolean{&r.csi}, "enable-csi-integration", "Reloader's: restart on Secrets Store CSI Driver rotations (watcher's --csi)")
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
		if reloaderBools[name] {
			fs.Lookup(name).NoOptDefVal = "true"
		}
		hidden(name)
	}
	return r
}

// reloaderAnnotation marks the flags of Reloader.
const reloaderAnnotation = "watcher.dev/reloader"

// applyReloader maps the Reloader flags given onto watcher's settings,
// after the command line and the environment were read: a setting of
// watcher's own, given, wins. reloaderDeployment tells whether watcher
// runs in Reloader's Deployment (its chart sets RELOADER_NAMESPACE).
func (o *Options) applyReloader(r *reloaderFlags, fs *pflag.FlagSet, given func(flag, env string) bool, reloaderDeployment bool) error {
	var errs []string
	used := reloaderDeployment
	fs.Visit(func(f *pflag.Flag) {
		if len(f.Annotations[reloaderAnnotation]) == 0 {
			return
		}
		used = true
		switch {
		case r.noted[f.Name] != nil:
			o.Notes = append(o.Notes, fmt.Sprintf("Reloader's --%s accepted: %s", f.Name, reloaderNoted[f.Name]))
		case r.keys[f.Name] != nil && *r.keys[f.Name] != reloaderKeys[f.Name] && !given("annotation-keys", "ANNOTATION_KEYS"):
			if o.AnnotationKeys == nil {
				o.AnnotationKeys = optin.Keys{}
			}
			o.AnnotationKeys[reloaderKeys[f.Name]] = *r.keys[f.Name]
		}
	})
	if !used {
		return nil
	}
	if !given("discovery", "DISCOVERY") {
		o.Discovery = plan.DiscoveryAnnotated
		if r.autoReloadAll {
			o.Discovery = plan.DiscoveryAll
		}
		o.Notes = append(o.Notes, fmt.Sprintf("Reloader's arguments: discovery %s, as Reloader (--auto-reload-all %t)", o.Discovery, r.autoReloadAll))
	}
	if r.strategy != "" && r.strategy != "default" && !given("restart-strategy", "RESTART_STRATEGY") {
		o.RestartStrategy = map[string]string{"env-vars": "env", "annotations": "annotation"}[r.strategy]
	}
	for _, ns := range r.namespacesIgnore {
		o.IgnoreConfigMapNamespaces = appendNew(o.IgnoreConfigMapNamespaces, ns)
		o.IgnoreSecretNamespaces = appendNew(o.IgnoreSecretNamespaces, ns)
	}
	for _, kind := range r.resourcesIgnore {
		switch strings.ToLower(kind) {
		case "configmaps":
			o.IgnoreConfigMapNamespaces = []string{AllNamespaces}
		case "secrets":
			o.IgnoreSecretNamespaces = []string{AllNamespaces}
		default:
			errs = append(errs, fmt.Sprintf("Reloader's --resources-to-ignore %q: want configmaps or secrets", kind))
		}
	}
	for _, kind := range r.workloadsIgnore {
		switch strings.ToLower(kind) {
		case "jobs", "cronjobs":
			k := workload.Job
			if strings.EqualFold(kind, "cronjobs") {
				k = workload.CronJob
			}
			if !given("ignore-workload-kinds", "IGNORE_WORKLOAD_KINDS") {
				o.IgnoreWorkloadKinds = appendNew(o.IgnoreWorkloadKinds, k.Name())
			}
		default:
			errs = append(errs, fmt.Sprintf("Reloader's --ignored-workload-types %q: want jobs or cronjobs", kind))
		}
	}
	if len(r.resourceSelector) > 0 && !given("config-selector", "CONFIG_SELECTOR") {
		sel, err := reloaderSelector(r.resourceSelector)
		if err != nil {
			errs = append(errs, "Reloader's --resource-label-selector: "+err.Error())
		}
		o.ConfigSelector = sel
	}
	if r.webhookURL != "" {
		o.webhookInstead(r.webhookURL, given)
	}
	if r.csi && !given("csi", "CSI") {
		o.CSI = true
	}
	if r.enablePprof && !given("pprof-addr", "PPROF_ADDR") {
		o.PprofAddr = ":6060"
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// AllNamespaces, in --ignore-configmap-namespaces or
// --ignore-secret-namespaces, ignores the kind in every namespace.
const AllNamespaces = "*"

// reloaderSelector converts Reloader's label selectors (key:value,
// key:* and key=* beside the usual forms) to one label selector, as
// Reloader's GetResourceLabelSelector does.
func reloaderSelector(items []string) (string, error) {
	out := make([]string, 0, len(items))
	for _, kv := range items {
		if k, v, ok := strings.Cut(kv, ":"); ok {
			kv = k + "=" + v
		}
		if k, v, ok := strings.Cut(kv, "="); ok && v == "*" {
			kv = k
		}
		out = append(out, kv)
	}
	sel := strings.Join(out, ",")
	if _, err := labels.Parse(sel); err != nil {
		return "", err
	}
	return sel, nil
}

func appendNew(list []string, item string) []string {
	if slices.Contains(list, item) {
		return list
	}
	return append(list, item)
}

// webhookInstead maps Reloader's --webhook-url, which posts each reload to
// a URL instead of making it: watcher decides as usual without writing
// (--dry-run) and sends each restart it would make as an alert to that
// URL (--alert-on-reload, sink webhook: the alert's JSON). A setting of
// watcher's own, given, wins.
func (o *Options) webhookInstead(url string, given func(flag, env string) bool) {
	if !given("dry-run", "DRY_RUN") {
		o.DryRun = true
	}
	if !given("alert-on-reload", "ALERT_ON_RELOAD") {
		o.Alert.OnReload = true
	}
	if !given("alert-sink", "ALERT_SINK") {
		o.Alert.Sink = alert.Webhook
	}
	if !given("alert-webhook-url", "ALERT_WEBHOOK_URL") && !given("alert-webhook-url-secret", "ALERT_WEBHOOK_URL_SECRET") {
		o.Alert.WebhookURL = url
	}
	o.Notes = append(o.Notes, "Reloader's --webhook-url accepted: watcher restarts nothing and posts each restart it would make to the URL as a JSON alert (--dry-run, --alert-on-reload, --alert-sink webhook)")
}
