package alert_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/watcher-dev/watcher/internal/alert"
	"github.com/watcher-dev/watcher/internal/cause"
	"github.com/watcher-dev/watcher/internal/object"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/")

// alerts are the cases of the golden files.
var alerts = map[string]alert.Alert{
	"restart": {
		Event:    alert.Restart,
		Workload: &alert.Object{Kind: "Deployment", Namespace: "shop", Name: "web"},
		Sources: []alert.Source{
			{Object: alert.Object{Kind: "Secret", Namespace: "shop", Name: "db"}, Keys: []string{"password"}, SealedSecret: "db", ChangedBy: []string{"sealed-secrets-controller"}},
			{Object: alert.Object{Kind: "ConfigMap", Namespace: "shop", Name: "web-config"}, Keys: []string{"LOG_LEVEL", "a<b>&c"}, ChangedBy: []string{"kubectl-edit", "helm"}},
		},
	},
	"held": {
		Event:    alert.Held,
		Workload: &alert.Object{Kind: "StatefulSet", Namespace: "shop", Name: "db"},
		Sources:  []alert.Source{{Object: alert.Object{Kind: "ConfigMap", Namespace: "shop", Name: "db-config"}, Keys: []string{"max_connections"}}},
		Reason:   "budget",
		Detail:   "3 restarts in the last 10m; the next is allowed in 4m",
	},
	"flapping": {
		Event:   alert.Flapping,
		Sources: []alert.Source{{Object: alert.Object{Kind: "Secret", Namespace: "shop", Name: "token"}, ChangedBy: []string{"external-secrets"}}},
		Detail:  "changed 12 times in 5m",
	},
	"failed-rollout": {
		Event:    alert.FailedRollout,
		Workload: &alert.Object{Kind: "Deployment", Namespace: "shop", Name: "web"},
		Reason:   "timeout",
		Detail:   "not done 10m after the restart",
	},
}

// TestFormat compares each sink's body for each case with its golden file
// (go test ./internal/alert -update rewrites them), and checks that every
// body is valid JSON.
func TestFormat(t *testing.T) {
	for _, sink := range alert.Sinks {
		for name, a := range alerts {
			for _, info := range []string{"", "cluster prod-1"} {
				file := sink + "-" + name
				if info != "" {
					file += "-info"
				}
				t.Run(file, func(t *testing.T) {
					got, err := alert.Format(sink, a, info)
					if err != nil {
						t.Fatal(err)
					}
					if !json.Valid(got) {
						t.Fatalf("not JSON: %s", got)
					}
					path := filepath.Join("testdata", file+".json")
					if *update {
						if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
							t.Fatal(err)
						}
					}
					want, err := os.ReadFile(path)
					if err != nil {
						t.Fatalf("%v (run go test ./internal/alert -update)", err)
					}
					if diff := cmp.Diff(strings.TrimSpace(string(want)), string(got)); diff != "" {
						t.Errorf("%s mismatch (-want +got):\n%s", path, diff)
					}
				})
			}
		}
	}
	if _, err := alert.Format("pagerduty", alerts["restart"], ""); err == nil {
		t.Errorf("an unknown sink formats")
	}
}

// TestFormatRotation: a rotation of the Secrets Store CSI Driver is said
// as the Event says it (package cause): the objects of the class named as
// objects, not keys.
func TestFormatRotation(t *testing.T) {
	a := alert.Alert{
		Event:    alert.Restart,
		Workload: &alert.Object{Kind: "Deployment", Namespace: "shop", Name: "web"},
		Sources:  []alert.Source{{Object: alert.Object{Kind: "SecretProviderClass", Namespace: "shop", Name: "db-creds"}, Keys: []string{"db-password"}}},
	}
	for _, sink := range alert.Sinks {
		got, err := alert.Format(sink, a, "")
		if err != nil {
			t.Fatal(err)
		}
		if s := string(got); !strings.Contains(s, "objects: ") || !strings.Contains(s, "db-password") || strings.Contains(s, "keys:") {
			t.Errorf("%s: %s", sink, s)
		}
	}
}

// TestRestartSaysCause: the alert of a restart says each change in the
// words of package cause, the author of the Event's and the log's
// sentences, in every sink: the webhook's message is the log line's
// "because", and a change recorded as one digest is said so (the alert
// used to say only "changed"). A guard's alert, which names only the
// source, says nothing of its keys.
func TestRestartSaysCause(t *testing.T) {
	said := cause.Restart{
		Workload: object.Ref{Kind: "Deployment", Namespace: "shop", Name: "web"},
		Changes: []cause.Change{
			{Source: object.Ref{Kind: "Secret", Namespace: "shop", Name: "db"}, Keys: []string{"password"}, SealedSecret: "db", ChangedBy: []string{"kubectl-edit", "helm"}},
			{Source: object.Ref{Kind: "ConfigMap", Namespace: "shop", Name: "cfg"}},
			{Source: object.Ref{Kind: cause.SecretProviderClass, Namespace: "shop", Name: "creds"}, Keys: []string{"secret/db-password"}},
		},
	}
	body, err := alert.Format(alert.Webhook, alert.FromRestart(said), "")
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Message string }
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if want := "watcher restarted Deployment shop/web because " + strings.Join(said.Because(), "; "); got.Message != want {
		t.Errorf("webhook message\n got %q\nwant %q", got.Message, want)
	}
	digest := "keys: " + cause.KeyList(nil)
	for _, sink := range alert.Sinks {
		body, err := alert.Format(sink, alert.FromRestart(said), "")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(body), digest) {
			t.Errorf("%s does not say %q: %s", sink, digest, body)
		}
		held, _ := alert.FromGuard("held", said.Workload, said.Changes[1].Source, "budget", "msg")
		if body, _ := alert.Format(sink, held, ""); strings.Contains(string(body), "keys") {
			t.Errorf("%s says keys a guard does not know: %s", sink, body)
		}
	}
}
