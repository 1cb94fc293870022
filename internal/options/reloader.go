package options

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Stakater Reloader's command-line flags (v1.4, internal/pkg/util), so
// that a Reloader Deployment keeps its arguments when its image is
// replaced by watcher's. Each is mapped onto watcher's own setting; no
// behaviour is implemented twice. Those of them that name a setting of
// watcher's own (--namespaces, --reload-on-create, --reload-on-delete,
// --log-format, --log-level, --pprof-addr) are watcher's flags, which
// accept Reloader's values too.
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
//	--ignored-workload-types            jobs: watcher restarts no Job
//	                                    (noted); cronjobs:
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
//	the annotation key flags            Reloader's own keys: accepted;
//	                                    other keys: refused, not yet
//	                                    supported
//	--enable-csi-integration            --csi
//	--namespace-selector,               refused, not yet supported:
//	--webhook-url                       watcher would restart more, or
//	                                    less, than Reloader does
//
// A refused flag stops watcher at start with a message that says so,
// rather than have it act otherwise than the Reloader it replaces.
type reloaderFlags struct {
	autoReloadAll    bool
	strategy         string
	namespacesIgnore []string
	resourcesIgnore  []string
	workloadsIgnore  []string
	resourceSelector []string
	enablePprof      bool
	csi              bool
	keys             map[string]*string
	ignoredBool      map[string]*bool
	refused          map[string]*string
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

// reloaderRefused are Reloader's flags watcher does not support yet: with
// them it would restart more or less than Reloader.
var reloaderRefused = map[string]string{
	"namespace-selector": "watching namespaces by label is not supported yet (use --namespaces or --namespaces-to-ignore)",
	"webhook-url":        "calling a webhook instead of restarting is not supported (watcher's alerts can post to a webhook beside its restarts: --alert-webhook-url, or --dry-run)",
}

// bindReloader binds Reloader's flags, hidden from --help (see
// reloaderFlags).
func bindReloader(fs *pflag.FlagSet) *reloaderFlags {
	r := &reloaderFlags{}
	r.keys, r.ignoredBool, r.refused, r.noted = map[string]*string{}, map[string]*bool{}, map[string]*string{}, map[string]*string{}
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
	fs.Var(boolean{&r.csi}, "enable-csi-integration", "Reloader's: restart on Secrets Store CSI Driver rotations (watcher's --csi)")
	fs.Lookup("enable-csi-integration").NoOptDefVal = "true"
	hidden("enable-csi-integration")
	for name, def := range reloaderKeys {
		v := def
		r.keys[name] = &v
		fs.StringVar(&v, name, def, "Reloader's annotation key; only its default is supported")
		hidden(name)
	}
	// The noted and the refused flags only say what watcher does instead.
	for _, set := range []struct {
		flags map[string]string
		into  map[string]*string
	}{{reloaderNoted, r.noted}, {reloaderRefused, r.refused}} {
		for name, what := range set.flags {
			v := ""
			set.into[name] = &v
			fs.StringVar(&v, name, "", "Reloader's; "+what)
			if reloaderBools[name] {
				fs.Lookup(name).NoOptDefVal = "true"
			}
			hidden(name)
		}
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
		case r.refused[f.Name] != nil && *r.refused[f.Name] != "" && *r.refused[f.Name] != "false":
			errs = append(errs, fmt.Sprintf("Reloader's --%s: %s", f.Name, reloaderRefused[f.Name]))
		case r.noted[f.Name] != nil:
			o.Notes = append(o.Notes, fmt.Sprintf("Reloader's --%s accepted: %s", f.Name, reloaderNoted[f.Name]))
		case r.keys[f.Name] != nil && *r.keys[f.Name] != reloaderKeys[f.Name]:
			errs = append(errs, fmt.Sprintf("Reloader's --%s %q: only Reloader's own key %s is supported yet", f.Name, *r.keys[f.Name], reloaderKeys[f.Name]))
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
		case "jobs":
			o.Notes = append(o.Notes, "Reloader's --ignored-workload-types jobs accepted: watcher restarts no Job")
		case "cronjobs":
			if !given("ignore-workload-kinds", "IGNORE_WORKLOAD_KINDS") {
				o.IgnoreWorkloadKinds = appendNew(o.IgnoreWorkloadKinds, workload.CronJob.Name())
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
