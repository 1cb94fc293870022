package options

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/watcher-dev/watcher/internal/alert"
	"github.com/watcher-dev/watcher/internal/envflag"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/workload"
)

// reloaderAnnotation marks the flags of Reloader.
const reloaderAnnotation = "watcher.dev/reloader"

// mapping applies Reloader's meanings to watcher's settings with the
// precedence of reloaderFlags.
type mapping struct {
	o   *Options
	src origin
	// onCommandLine: a Reloader flag is on the command line. Without one
	// (Reloader mode from RELOADER_NAMESPACE alone), Reloader's defaults
	// give way to watcher's variables.
	onCommandLine bool
}

// set gives watcher's setting flag the meaning that by states, through
// apply, unless watcher's own flag is on the command line. A value of the
// setting read from the environment is overridden and noted, unless
// fallback (by is one of Reloader's defaults, no flag) and no Reloader
// flag is on the command line.
func (m mapping) set(flag, by string, fallback bool, apply func()) {
	if m.src.flag(flag) {
		return
	}
	if env, ok := m.src.fromEnv[flag]; ok {
		if fallback && !m.onCommandLine {
			return
		}
		m.o.note("%s (environment) overridden by %s", env, by)
	}
	apply()
}

// applyReloader maps the Reloader flags given onto watcher's settings,
// after the command line and the environment were read (see
// reloaderFlags).
func (o *Options) applyReloader(r *reloaderFlags, src origin) error {
	_, reloaderMode := src.env("RELOADER_NAMESPACE")
	m := mapping{o: o, src: src}
	src.fs.Visit(func(f *pflag.Flag) {
		if len(f.Annotations[reloaderAnnotation]) > 0 {
			m.onCommandLine, reloaderMode = true, true
		}
	})
	if !reloaderMode {
		return nil
	}
	var errs []string
	o.mapKeys(r, m)
	by, fallback := "Reloader's default: no --auto-reload-all", true
	if src.fs.Changed("auto-reload-all") {
		by, fallback = "Reloader's --auto-reload-all", false
	}
	m.set("discovery", by, fallback, func() {
		o.Discovery = map[bool]string{true: plan.DiscoveryAll, false: plan.DiscoveryAnnotated}[r.autoReloadAll]
		o.note("Reloader's arguments: discovery %s, as Reloader (--auto-reload-all %t)", o.Discovery, r.autoReloadAll)
	})
	if r.strategy != "" && r.strategy != "default" {
		m.set("restart-strategy", "Reloader's --reload-strategy", false, func() {
			o.RestartStrategy = map[string]string{"env-vars": "env", "annotations": "annotation"}[r.strategy]
		})
	}
	o.reloaderNamespaces(r, m)
	for _, kind := range r.resourcesIgnore {
		switch strings.ToLower(kind) {
		case "configmaps":
			m.set("ignore-configmap-namespaces", "Reloader's --resources-to-ignore", false, func() { o.IgnoreConfigMapNamespaces = []string{AllNamespaces} })
		case "secrets":
			m.set("ignore-secret-namespaces", "Reloader's --resources-to-ignore", false, func() { o.IgnoreSecretNamespaces = []string{AllNamespaces} })
		default:
			errs = append(errs, fmt.Sprintf("Reloader's --resources-to-ignore %q: want configmaps or secrets", kind))
		}
	}
	var kinds []string
	for _, kind := range r.workloadsIgnore {
		switch strings.ToLower(kind) {
		case "jobs":
			kinds = appendNew(kinds, workload.Job.Name())
		case "cronjobs":
			kinds = appendNew(kinds, workload.CronJob.Name())
		default:
			errs = append(errs, fmt.Sprintf("Reloader's --ignored-workload-types %q: want jobs or cronjobs", kind))
		}
	}
	if len(kinds) > 0 {
		m.set("ignore-workload-kinds", "Reloader's --ignored-workload-types", false, func() { o.IgnoreWorkloadKinds = kinds })
	}
	if len(r.resourceSelector) > 0 {
		sel, err := envflag.ReloaderSelector(r.resourceSelector)
		if err != nil {
			errs = append(errs, "Reloader's --resource-label-selector: "+err.Error())
		}
		m.set("config-selector", "Reloader's --resource-label-selector", false, func() { o.ConfigSelector = sel })
	}
	if r.webhookURL != "" {
		o.webhookInstead(r.webhookURL, m)
	}
	if src.fs.Changed("enable-csi-integration") {
		m.set("csi", "Reloader's --enable-csi-integration", false, func() { o.CSI = r.csi })
	}
	if src.fs.Changed("enable-pprof") {
		m.set("pprof-addr", "Reloader's --enable-pprof", false, func() {
			o.PprofAddr = map[bool]string{true: ":6060", false: "0"}[r.enablePprof]
		})
	}
	errs = append(errs, o.reloaderLease(r, m)...)
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// mapKeys maps Reloader's annotation key flags: each given reads its
// key in place of Reloader's (an entry of --annotation-keys), unless
// --annotation-keys is on the command line.
func (o *Options) mapKeys(r *reloaderFlags, m mapping) {
	m.src.fs.Visit(func(f *pflag.Flag) {
		if r.noted[f.Name] != nil {
			o.note("Reloader's --%s accepted: %s", f.Name, reloaderNoted[f.Name])
		}
		key := r.keys[f.Name]
		if key == nil {
			return
		}
		own := reloaderKeys[f.Name]
		if _, set := o.AnnotationKeys[own]; *key == own && !set {
			return // Reloader's own key: nothing to change
		}
		m.set("annotation-keys", "Reloader's --"+f.Name, false, func() {
			if o.AnnotationKeys == nil {
				o.AnnotationKeys = optin.Keys{}
			}
			o.AnnotationKeys[own] = *key
			if *key == own {
				delete(o.AnnotationKeys, own)
			}
		})
	})
}

// reloaderNamespaces applies Reloader's namespace rules, as its
// resolveWatchNamespaces: watching some namespaces only (--namespaces, or
// KUBERNETES_NAMESPACE, see applyDeploymentEnv), Reloader ignores
// --namespaces-to-ignore and --namespace-selector; watching all, it
// ignores exactly the namespaces of --namespaces-to-ignore, none by
// default.
func (o *Options) reloaderNamespaces(r *reloaderFlags, m mapping) {
	ignored, by := r.namespacesIgnore, "Reloader's --namespaces-to-ignore"
	if len(ignored) == 0 {
		by = "Reloader's default: no namespace ignored"
	}
	if len(o.Namespaces) > 0 {
		if len(ignored) > 0 {
			o.note("Reloader's --namespaces-to-ignore ignored, as Reloader does when it watches only %s", strings.Join(o.Namespaces, ","))
		}
		ignored, by = nil, "Reloader's scoped mode: no namespace ignored"
		if o.NamespaceSelector != "" {
			o.note("--namespace-selector ignored, as Reloader does when it watches only %s", strings.Join(o.Namespaces, ","))
			o.NamespaceSelector = ""
		}
	}
	m.set("ignore-configmap-namespaces", by, len(r.namespacesIgnore) == 0, func() { o.IgnoreConfigMapNamespaces = slices.Clone(ignored) })
	m.set("ignore-secret-namespaces", by, len(r.namespacesIgnore) == 0, func() { o.IgnoreSecretNamespaces = slices.Clone(ignored) })
}

// reloaderLease maps Reloader's leader-election flags; an empty value
// changes nothing, as in Reloader's chart.
func (o *Options) reloaderLease(r *reloaderFlags, m mapping) []string {
	var errs []string
	for flag, own := range reloaderLeaderElection {
		v := strings.TrimSpace(*r.leaderElection[own])
		if v == "" {
			continue
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Sprintf("Reloader's --%s %q: want a duration such as 15s", flag, v))
			continue
		}
		m.set(own, "Reloader's --"+flag, false, func() {
			*map[string]*time.Duration{
				"lease-duration":       &o.Lease.Duration,
				"lease-renew-deadline": &o.Lease.RenewDeadline,
				"lease-retry-period":   &o.Lease.RetryPeriod,
			}[own] = d
		})
	}
	slices.Sort(errs)
	return errs
}

// AllNamespaces, in --ignore-configmap-namespaces or
// --ignore-secret-namespaces, ignores the kind in every namespace.
const AllNamespaces = "*"

func appendNew(list []string, item string) []string {
	if slices.Contains(list, item) {
		return list
	}
	return append(list, item)
}

// webhookInstead maps Reloader's --webhook-url, which posts each reload to
// a URL instead of making it: watcher decides as usual without writing
// (--dry-run) and sends each restart it would make as an alert to that
// URL (--alert-on-reload, sink webhook: the alert's JSON). Watcher's own
// flags on the command line win.
func (o *Options) webhookInstead(url string, m mapping) {
	const by = "Reloader's --webhook-url"
	m.set("dry-run", by, false, func() { o.DryRun = true })
	m.set("alert-on-reload", by, false, func() { o.Alert.OnReload = true })
	m.set("alert-sink", by, false, func() { o.Alert.Sink = alert.Webhook })
	if !m.src.flag("alert-webhook-url") && !m.src.flag("alert-webhook-url-secret") {
		m.set("alert-webhook-url", by, false, func() { o.Alert.WebhookURL = url })
		m.set("alert-webhook-url-secret", by, false, func() { o.Alert.WebhookURLSecret = "" })
	}
	o.note("Reloader's --webhook-url accepted: watcher restarts nothing and posts each restart it would make to the URL as a JSON alert (--dry-run, --alert-on-reload, --alert-sink webhook)")
}
