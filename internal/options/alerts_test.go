package options_test

import (
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/watcher-dev/watcher/internal/options"
)

// alertSwitches are the flags switching alerts on, with their variables.
var alertSwitches = map[string]string{
	"alert-on-reload": "ALERT_ON_RELOAD", "alert-on-held": "ALERT_ON_HELD",
	"alert-on-flapping": "ALERT_ON_FLAPPING", "alert-on-failed-rollout": "ALERT_ON_FAILED_ROLLOUT",
}

const hookURL = "https://hooks.slack.com/services/T000/B000/sEcReTtOkEn"

// TestAlertSettings: Reloader's variables as its deployments set them, the
// switches, and the settings an alert needs, checked only when one is on.
// No error shows the URL or the proxy.
func TestAlertSettings(t *testing.T) {
	for _, tt := range []struct {
		name    string
		env     map[string]string
		args    []string
		want    func(*options.Options)
		wantErr string
	}{
		{
			name: "Reloader's variables",
			env:  map[string]string{"ALERT_ON_RELOAD": "true", "ALERT_SINK": "slack", "ALERT_WEBHOOK_URL": hookURL, "ALERT_ADDITIONAL_INFO": "staging"},
			want: func(o *options.Options) {
				o.Alert = options.Alerts{OnReload: true, Sink: "slack", WebhookURL: hookURL, AdditionalInfo: "staging"}
			},
		},
		{
			name: "every switch, the URL from a Secret, through a proxy",
			args: []string{"--alert-on-held", "--alert-on-flapping", "--alert-on-failed-rollout", "--alert-sink=teams", "--alert-webhook-url-secret=watcher/alerts:url", "--alert-webhook-proxy=http://u:p@proxy:3128"},
			want: func(o *options.Options) {
				o.Alert = options.Alerts{OnHeld: true, OnFlapping: true, OnFailedRollout: true, Sink: "teams", WebhookURLSecret: "watcher/alerts:url", WebhookProxy: "http://u:p@proxy:3128"}
			},
		},
		{name: "switched on with no URL", env: map[string]string{"ALERT_ON_RELOAD": "true"}, wantErr: "ALERT_WEBHOOK_URL"},
		{name: "a URL and a Secret", args: []string{"--alert-on-reload", "--alert-webhook-url=" + hookURL, "--alert-webhook-url-secret=a/b:c"}, wantErr: "not both"},
		{name: "not a URL", env: map[string]string{"ALERT_ON_RELOAD": "1", "ALERT_WEBHOOK_URL": "hooks.slack.com/sEcReTtOkEn"}, wantErr: "want an http or https URL"},
		{name: "a Secret with no key", args: []string{"--alert-on-failed-rollout", "--alert-webhook-url-secret=watcher/alerts"}, wantErr: "namespace/name:key"},
		{name: "a bad proxy", env: map[string]string{"ALERT_ON_RELOAD": "true", "ALERT_WEBHOOK_URL": hookURL, "ALERT_WEBHOOK_PROXY": "sEcReTtOkEn"}, wantErr: "ALERT_WEBHOOK_PROXY"},
		{
			name: "Reloader's raw sink, and any other, is the webhook sink",
			env:  map[string]string{"ALERT_ON_RELOAD": "true", "ALERT_SINK": " Raw", "ALERT_WEBHOOK_URL": hookURL},
			want: func(o *options.Options) {
				o.Alert = options.Alerts{OnReload: true, Sink: "webhook", WebhookURL: hookURL}
				o.Notes = []string{`alert sink "raw" read as webhook (plain JSON posted to the URL), as Reloader posts to any sink but slack, teams and gchat`}
			},
		},
		{
			name: "an empty sink is the webhook sink, with no note",
			env:  map[string]string{"ALERT_SINK": ""},
			want: func(o *options.Options) {},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := options.Parse(tt.args, env(tt.env), io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse() error = %v, want one containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "sEcReTtOkEn") {
					t.Errorf("the error shows the URL: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse() error: %v", err)
			}
			want := defaults()
			tt.want(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
