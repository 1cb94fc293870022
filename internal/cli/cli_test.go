package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/workload"
)

// TestParseTarget: kubectl's names of each kind, and what is refused.
func TestParseTarget(t *testing.T) {
	tests := []struct {
		arg  string
		want target
		name string
		err  bool
	}{
		{"deployment/web", target{workload: workload.Deployment}, "web", false},
		{"Deployment/web", target{workload: workload.Deployment}, "web", false},
		{"deployments.apps/web", target{workload: workload.Deployment}, "web", false},
		{"sts/db", target{workload: workload.StatefulSet}, "db", false},
		{"ds/agent", target{workload: workload.DaemonSet}, "agent", false},
		{"cj/nightly", target{workload: workload.CronJob}, "nightly", false},
		{"rollout/canary", target{workload: workload.Rollout}, "canary", false},
		{"cm/settings", target{config: refs.ConfigMap}, "settings", false},
		{"secret/db", target{config: refs.Secret}, "db", false},
		{"pod/web", target{}, "", true},
		{"web", target{}, "", true},
		{"deployment/", target{}, "", true},
		{"deployment/a/b", target{}, "", true},
	}
	for _, tt := range tests {
		got, name, err := parseTarget(tt.arg)
		if (err != nil) != tt.err || got.workload.Name() != tt.want.workload.Name() || got.config != tt.want.config || name != tt.name {
			t.Errorf("parseTarget(%q) = %v %q %v; want %v %q, error %v", tt.arg, got, name, err, tt.want, tt.name, tt.err)
		}
	}
}

// TestMainUsage: what the commands say, and their exit codes, before they
// connect to anything.
func TestMainUsage(t *testing.T) {
	tests := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"/usr/local/bin/kubectl-watcher"}, 2, "kubectl watcher explain KIND/NAME"},
		{[]string{"kubectl-watcher", "--help"}, 0, "kubectl watcher graph [-n NAMESPACE | -A]"},
		{[]string{"watcher", "explain", "--help"}, 0, "never a value"},
		{[]string{"watcher", "explain"}, 2, "want one KIND/NAME"},
		{[]string{"watcher", "explain", "deploy/web", "-o", "dot"}, 2, `invalid --output "dot": want text, json`},
		{[]string{"watcher", "graph", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"watcher", "graph", "--discovery", "some"}, 2, "--discovery"},
		{[]string{"watcher", "graph", "--workload-selector", "a b"}, 2, "workload-selector"},
		{[]string{"watcher", "key"}, 2, "watcher key derive -n NAMESPACE"},
		{[]string{"watcher", "key", "rotate"}, 2, "watcher key derive -n NAMESPACE"},
		{[]string{"watcher", "key", "derive"}, 2, "want -n NAMESPACE"},
		{[]string{"watcher", "key", "derive", "-n", "shop", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"watcher", "key", "derive", "--help"}, 0, "of no other"},
		{[]string{"watcher", "explain", "--help"}, 0, "WATCHER_EXPLAIN_KEY"},
		{[]string{"watcher", "explain", "deploy/web", "--explain-key", "shop:0123:c2VjcmV0LXZhbHVl"}, 2, "not a hash key ID"},
		{[]string{"kubectl-watcher", "--help"}, 0, "kubectl watcher migrate [-n NAMESPACE] [--deployment NAME]"},
		{[]string{"kubectl-watcher", "migrate", "--help"}, 0, "       kubectl watcher migrate --compare"},
		{[]string{"watcher", "migrate", "--help"}, 0, "agree, only\nwatcher or only Reloader"},
		{[]string{"watcher", "migrate", "-o", "dot"}, 2, `invalid --output "dot": want text or json`},
		{[]string{"watcher", "migrate", "--compare", "-o", "rbac"}, 2, `invalid --output "rbac"`},
		{[]string{"watcher", "migrate", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"watcher", "migrate", "--compare", "--since", "0s"}, 2, "--since must be positive"},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), tt.args, &out, &errOut)
		if code != tt.code || !strings.Contains(errOut.String(), tt.out) {
			t.Errorf("Main(%q) = %d, %q; want %d and %q", tt.args, code, errOut.String(), tt.code, tt.out)
		}
	}
}

// TestExplainKeyFromEnv: a key in $WATCHER_EXPLAIN_KEY is read like
// --explain-key, and a bad one is refused without being quoted.
func TestExplainKeyFromEnv(t *testing.T) {
	const secretish = "c2VjcmV0LXZhbHVlLW5vdC1hLWtleQ"
	t.Setenv(explainKeyEnv, "shop:0123456789abcdef:"+secretish)
	var out, errOut bytes.Buffer
	code := Main(context.Background(), []string{"watcher", "explain", "deploy/web"}, &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "its key has 22 bytes, not 32") || strings.Contains(errOut.String(), secretish) {
		t.Errorf("Main = %d, %q; want 2, the key's length, not the key", code, errOut.String())
	}
}
