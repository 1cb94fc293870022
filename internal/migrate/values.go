package migrate

import (
	"slices"
	"strings"

	"github.com/watcher-dev/watcher/internal/options"
)

// Value is one value of watcher's chart (deploy/helm/watcher) given on the
// helm command line.
type Value struct {
	// Path is the value's path in values.yaml ("discovery.namespaces").
	Path string `json:"path"`
	// JSON is its value, as --set-json takes it.
	JSON string `json:"json"`
	// Why says what of Reloader's Deployment it follows from.
	Why string `json:"why"`
}

// Hidden stands in the printed commands for a webhook URL, which is never
// printed (options.Alerts.WebhookURL).
const Hidden = "<the webhook URL of Reloader's Deployment, not printed>"

// chartValue gives one chart value from the settings of watcher read from
// Reloader's Deployment (o) against watcher's defaults (d): ok false when
// the chart's default is right.
type chartValue struct {
	path string
	of   func(r Reloader, o, d *options.Options) (v any, why string, ok bool)
}

// chartValues are the values of watcher's chart that follow from Reloader's
// Deployment: each is a setting of watcher as watcher reads Reloader's
// arguments and environment (options.Parse), given where it differs from
// watcher's default, so that the chart's environment says the same as the
// arguments and the chart grants the rights they need (csi.enabled,
// discovery.namespaceSelector, rbac.scope); and the replicas.
var chartValues = []chartValue{
	{"replicas", func(r Reloader, _, _ *options.Options) (any, string, bool) {
		return r.Replicas, "the Deployment's replicas; watcher elects a leader through a Lease (lock.mode lease)", r.Replicas > 1
	}},
	{"discovery.mode", func(_ Reloader, o, d *options.Options) (any, string, bool) {
		return o.Discovery, "Reloader restarts only the workloads that opt in, unless --auto-reload-all", o.Discovery != d.Discovery
	}},
	{"discovery.namespaces", func(_ Reloader, o, _ *options.Options) (any, string, bool) {
		return o.Namespaces, "the namespaces Reloader watches (--namespaces or KUBERNETES_NAMESPACE)", len(o.Namespaces) > 0
	}},
	{"rbac.scope", func(_ Reloader, o, _ *options.Options) (any, string, bool) {
		return "namespaced", "Roles in those namespaces only, as Reloader's chart grants them", len(o.Namespaces) > 0
	}},
	{"discovery.namespaceSelector", func(_ Reloader, o, d *options.Options) (any, string, bool) {
		return o.NamespaceSelector, "--namespace-selector (and the right to list namespaces)", o.NamespaceSelector != d.NamespaceSelector
	}},
	{"discovery.ignoreConfigMapNamespaces", func(_ Reloader, o, d *options.Options) (any, string, bool) {
		return nonNil(o.IgnoreConfigMapNamespaces), "the namespaces Reloader ignores (--namespaces-to-ignore, --resources-to-ignore): none by default", !slices.Equal(o.IgnoreConfigMapNamespaces, d.IgnoreConfigMapNamespaces)
	}},
	{"discovery.ignoreSecretNamespaces", func(_ Reloader, o, d *options.Options) (any, string, bool) {
		return nonNil(o.IgnoreSecretNamespaces), "the namespaces Reloader ignores (--namespaces-to-ignore, --resources-to-ignore): none by default", !slices.Equal(o.IgnoreSecretNamespaces, d.IgnoreSecretNamespaces)
	}},
	{"discovery.ignoreWorkloadKinds", func(_ Reloader, o, _ *options.Options) (any, string, bool) {
		return o.IgnoreWorkloadKinds, "--ignored-workload-types (the chart then leaves out the rights on Jobs)", len(o.IgnoreWorkloadKinds) > 0
	}},
	{"discovery.configSelector", func(_ Reloader, o, d *options.Options) (any, string, bool) {
		return o.ConfigSelector, "--resource-label-selector", o.ConfigSelector != d.ConfigSelector
	}},
	{"discovery.annotationKeys", func(_ Reloader, o, _ *options.Options) (any, string, bool) {
		return o.AnnotationKeys, "Reloader's custom annotation keys", len(o.AnnotationKeys) > 0
	}},
	{"restart.strategy", func(_ Reloader, o, d *options.Options) (any, string, bool) {
		return o.RestartStrategy, "--reload-strategy", o.RestartStrategy != d.RestartStrategy
	}},
	{"restart.reloadOnCreate", func(_ Reloader, o, d *options.Options) (any, string, bool) {
		return o.RestartOnCreate, "--reload-on-create", o.RestartOnCreate != d.RestartOnCreate
	}},
	{"restart.reloadOnDelete", func(_ Reloader, o, d *options.Options) (any, string, bool) {
		return o.ReloadOnDelete, "--reload-on-delete", o.ReloadOnDelete != d.ReloadOnDelete
	}},
	{"csi.enabled", func(_ Reloader, o, _ *options.Options) (any, string, bool) {
		return true, "--enable-csi-integration (and the rights to read the CSI driver's pod statuses)", o.CSI
	}},
	{"alerts.onReload", func(_ Reloader, o, _ *options.Options) (any, string, bool) {
		return true, "ALERT_ON_RELOAD, or --webhook-url", o.Alert.OnReload
	}},
	{"alerts.sink", func(_ Reloader, o, d *options.Options) (any, string, bool) {
		return o.Alert.Sink, "ALERT_SINK", o.Alert.Sink != d.Alert.Sink
	}},
	{"alerts.webhookURLSecret", func(r Reloader, o, _ *options.Options) (any, string, bool) {
		ref, ok := r.SecretEnv["ALERT_WEBHOOK_URL"]
		return r.Namespace + "/" + ref.Name + ":" + ref.Key, "ALERT_WEBHOOK_URL, from a key of a Secret of Reloader's namespace, read where it is",
			ok && ref.Kind == "Secret" && o.Alert.WebhookURLSecret == ""
	}},
	{"alerts.webhookURL", func(r Reloader, o, _ *options.Options) (any, string, bool) {
		_, fromSecret := r.SecretEnv["ALERT_WEBHOOK_URL"]
		return Hidden, "ALERT_WEBHOOK_URL or --webhook-url (put it in a Secret: alerts.webhookURLSecret)", o.Alert.WebhookURL != "" && !fromSecret
	}},
	{"alerts.additionalInfo", func(_ Reloader, o, _ *options.Options) (any, string, bool) {
		return o.Alert.AdditionalInfo, "ALERT_ADDITIONAL_INFO", o.Alert.AdditionalInfo != ""
	}},
	{"extraEnv", func(r Reloader, o, _ *options.Options) (any, string, bool) {
		v := r.Env["METRICS_COUNT_BY_NAMESPACE"]
		return []map[string]string{{"name": "METRICS_COUNT_BY_NAMESPACE", "value": v}}, "Reloader's reloader_reload_executed_total_by_namespace", o.MetricsByNamespace
	}},
	{"lock.leaseDuration", func(_ Reloader, o, d *options.Options) (any, string, bool) {
		return o.Lease.Duration.String(), "--leader-election-lease-duration", o.Lease.Duration != d.Lease.Duration
	}},
	{"lock.leaseRenewDeadline", func(_ Reloader, o, d *options.Options) (any, string, bool) {
		return o.Lease.RenewDeadline.String(), "--leader-election-renew-deadline", o.Lease.RenewDeadline != d.Lease.RenewDeadline
	}},
	{"lock.leaseRetryPeriod", func(_ Reloader, o, d *options.Options) (any, string, bool) {
		return o.Lease.RetryPeriod.String(), "--leader-election-retry-period", o.Lease.RetryPeriod != d.Lease.RetryPeriod
	}},
}

// Values returns the chart values that follow from Reloader's Deployment
// r, read as o (Reloader.Options).
func Values(r Reloader, o *options.Options) []Value {
	d := options.Defaults()
	var out []Value
	for _, cv := range chartValues {
		v, why, ok := cv.of(r, o, d)
		if !ok {
			continue
		}
		out = append(out, Value{Path: cv.path, JSON: jsonText(v), Why: why})
	}
	return out
}

// ShownArgs returns Reloader's arguments as they are, but for a webhook
// URL (--webhook-url's value), shown as Hidden.
func ShownArgs(args []string) []string {
	out := slices.Clone(args)
	for i := 0; i < len(out); i++ {
		a := strings.TrimLeft(out[i], "-")
		if a == out[i] {
			continue
		}
		switch k, _, eq := strings.Cut(a, "="); {
		case k != "webhook-url":
		case eq:
			out[i] = out[i][:len(out[i])-len(a)] + "webhook-url=" + Hidden
		case i+1 < len(out):
			out[i+1] = Hidden
			i++
		}
	}
	return out
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}
