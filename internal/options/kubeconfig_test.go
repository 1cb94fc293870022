package options_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/watcher-dev/watcher/internal/options"
)

const kubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://%s:6443"}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
users:
- name: u
  user: {token: t}
`

func writeKubeconfig(t *testing.T, host string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(strings.Replace(kubeconfig, "%s", host, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRESTConfig: LOCAL_CONFIG picks the source, a kubeconfig comes from
// --kubeconfig, else $KUBECONFIG, else ~/.kube/config; outside a cluster the
// in-cluster config fails with a message that says what to set.
func TestRESTConfig(t *testing.T) {
	flagFile, envFile := writeKubeconfig(t, "from-flag"), writeKubeconfig(t, "from-env")
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a cluster
	tr, fa := true, false
	tests := []struct {
		name       string
		local      *bool
		flag, env  string
		homeConfig bool
		wantHost   string // "" means an error is wanted
		wantErr    string
	}{
		{name: "True, flag", local: &tr, flag: flagFile, env: envFile, wantHost: "from-flag"},
		{name: "True, KUBECONFIG", local: &tr, env: envFile, wantHost: "from-env"},
		{name: "True, ~/.kube/config", local: &tr, homeConfig: true, wantHost: "from-home"},
		{name: "unset, flag", flag: flagFile, wantHost: "from-flag"},
		{name: "unset, ~/.kube/config", homeConfig: true, wantHost: "from-home"},
		{name: "unset, nothing: in-cluster", wantErr: "not running in a cluster"},
		{name: "False ignores kubeconfigs", local: &fa, flag: flagFile, env: envFile, wantErr: "LOCAL_CONFIG=True"},
		{name: "True, missing file", local: &tr, flag: filepath.Join(home, "missing"), wantErr: "load kubeconfig"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tt.env)
			_ = os.RemoveAll(filepath.Join(home, ".kube"))
			if tt.homeConfig {
				_ = os.MkdirAll(filepath.Join(home, ".kube"), 0o700)
				data, _ := os.ReadFile(writeKubeconfig(t, "from-home"))
				_ = os.WriteFile(filepath.Join(home, ".kube", "config"), data, 0o600)
			}
			o := options.Defaults()
			o.LocalConfig, o.Kubeconfig = tt.local, tt.flag
			cfg, err := o.RESTConfig()
			if tt.wantHost == "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("RESTConfig() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(cfg.Host, tt.wantHost) || cfg.QPS != 50 || cfg.Burst != 100 || cfg.UserAgent != "watcher" {
				t.Errorf("RESTConfig() = host %s, qps %v, burst %d, agent %q", cfg.Host, cfg.QPS, cfg.Burst, cfg.UserAgent)
			}
		})
	}
}
