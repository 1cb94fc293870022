package options

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/watcher-dev/watcher/internal/alert"
	"github.com/watcher-dev/watcher/internal/envflag"
)

// Alerts are the alert settings: Reloader's ALERT_* variables, and the
// switches of the alerts Reloader does not have.
type Alerts struct {
	// OnReload alerts on every restart (Reloader's ALERT_ON_RELOAD);
	// OnHeld, OnFlapping and OnFailedRollout on held restarts, flapping
	// sources and failed rollouts.
	OnReload, OnHeld, OnFlapping, OnFailedRollout bool
	// Sink is one of alert.Sinks.
	Sink string
	// WebhookURL is where alerts go; never printed. WebhookURLSecret, in
	// its place, names a key of a Secret holding it: "namespace/name:key".
	WebhookURL       string
	WebhookURLSecret string
	// AdditionalInfo is added to every alert, such as the cluster's name.
	AdditionalInfo string
	// WebhookProxy is an HTTP proxy to reach the webhook; never printed (it
	// may hold a password).
	WebhookProxy string
}

// Any tells whether some alert is switched on.
func (a Alerts) Any() bool { return a.OnReload || a.OnHeld || a.OnFlapping || a.OnFailedRollout }

// bindAlerts registers the alert settings.
func (o *Options) bindAlerts(fs *pflag.FlagSet, bind func(v pflag.Value, name, env, usage string)) {
	a := &o.Alert
	bind(envflag.Bool(&a.OnReload), "alert-on-reload", "ALERT_ON_RELOAD", "send an alert when a workload is restarted")
	bind(envflag.Bool(&a.OnHeld), "alert-on-held", "ALERT_ON_HELD", "send an alert when a restart is held")
	bind(envflag.Bool(&a.OnFlapping), "alert-on-flapping", "ALERT_ON_FLAPPING", "send an alert when a ConfigMap or Secret flaps")
	bind(envflag.Bool(&a.OnFailedRollout), "alert-on-failed-rollout", "ALERT_ON_FAILED_ROLLOUT", "send an alert when a rollout watcher started fails")
	for _, name := range []string{"alert-on-reload", "alert-on-held", "alert-on-flapping", "alert-on-failed-rollout"} {
		fs.Lookup(name).NoOptDefVal = "true"
	}
	bind(sinkValue{&a.Sink, &o.Notes}, "alert-sink", "ALERT_SINK", "where alerts go: slack, teams, gchat or webhook (plain JSON; Reloader's raw, and any other value, too)")
	bind(envflag.Secret(&a.WebhookURL), "alert-webhook-url", "ALERT_WEBHOOK_URL", "URL alerts are posted to (never printed)")
	bind(envflag.String(&a.WebhookURLSecret), "alert-webhook-url-secret", "ALERT_WEBHOOK_URL_SECRET", "in place of --alert-webhook-url: the key of a Secret holding the URL, as namespace/name:key, read at start and on every change")
	bind(envflag.String(&a.AdditionalInfo), "alert-additional-info", "ALERT_ADDITIONAL_INFO", "text added to every alert, such as the cluster's name")
	bind(envflag.Secret(&a.WebhookProxy), "alert-webhook-proxy", "ALERT_WEBHOOK_PROXY", "HTTP proxy to reach the webhook, such as http://proxy:3128 (never printed)")
}

// sinkValue is --alert-sink: one of alert.Sinks. Reloader's raw, and any
// value Reloader does not know, is the webhook sink (plain JSON), as
// Reloader posts to a raw webhook whatever is not slack, teams or gchat:
// noted, never an error.
type sinkValue struct {
	sink  *string
	notes *[]string
}

func (s sinkValue) String() string { return *s.sink }
func (s sinkValue) Type() string   { return strings.Join(alert.Sinks, "|") }
func (s sinkValue) Set(v string) error {
	v = strings.ToLower(strings.TrimSpace(v))
	if slices.Contains(alert.Sinks, v) {
		*s.sink = v
		return nil
	}
	*s.sink = alert.Webhook
	if v != "" {
		*s.notes = append(*s.notes, fmt.Sprintf("alert sink %q read as %s (plain JSON posted to the URL), as Reloader posts to any sink but slack, teams and gchat", v, alert.Webhook))
	}
	return nil
}

// validateAlerts checks the alert settings when an alert is switched on.
func (o *Options) validateAlerts(p *problems) {
	a := o.Alert
	if !a.Any() {
		return
	}
	switch {
	case a.WebhookURL == "" && a.WebhookURLSecret == "":
		p.add("alert-webhook-url", "ALERT_WEBHOOK_URL", "an alert is switched on: want the URL alerts go to, or --alert-webhook-url-secret")
	case a.WebhookURL != "" && a.WebhookURLSecret != "":
		p.add("alert-webhook-url-secret", "ALERT_WEBHOOK_URL_SECRET", "set it or --alert-webhook-url (ALERT_WEBHOOK_URL), not both")
	case a.WebhookURL != "" && !isHTTPURL(a.WebhookURL):
		p.add("alert-webhook-url", "ALERT_WEBHOOK_URL", "want an http or https URL") // never the URL itself
	}
	if a.WebhookURLSecret != "" {
		nsName, key, ok := strings.Cut(a.WebhookURLSecret, ":")
		ns, name, ok2 := strings.Cut(nsName, "/")
		if !ok || !ok2 || ns == "" || name == "" || key == "" {
			p.add("alert-webhook-url-secret", "ALERT_WEBHOOK_URL_SECRET", "want namespace/name:key, such as watcher/alerts:url")
		}
	}
	if a.WebhookProxy != "" && !isHTTPURL(a.WebhookProxy) {
		p.add("alert-webhook-proxy", "ALERT_WEBHOOK_PROXY", "want an http or https URL such as http://proxy:3128")
	}
}

func isHTTPURL(s string) bool {
	u, err := url.Parse(strings.TrimSpace(s))
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
