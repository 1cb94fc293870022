package migrate

import (
	"bytes"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/watcher-dev/watcher/test/fixture"
)

// TestSharedNamespace: the image swap warns, loudly and on several lines,
// when Reloader's namespace holds ServiceAccounts or ConfigMaps other than
// Reloader's own and those of every namespace (or could not be listed, or
// Reloader runs as the default ServiceAccount), and recommends the chart
// in a namespace of its own; not when the namespace is Reloader's alone,
// nor when it was not read.
func TestSharedNamespace(t *testing.T) {
	own := Neighbours{ServiceAccounts: []string{"default", "reloader-reloader"},
		ConfigMaps: []string{"kube-root-ca.crt", "watcher-settings", "watcher-recreate-0123456789abcdef0123"}}
	many := make([]string, 12)
	for i := range many {
		many[i] = "sa" + string(rune('a'+i))
	}
	tests := []struct {
		name string
		n    *Neighbours
		sa   string // Reloader's ServiceAccount; "" for the chart's
		want []string
		not  []string
	}{
		{name: "not read", n: nil},
		{name: "Reloader's own namespace", n: &own},
		{name: "kube-system", n: &Neighbours{ServiceAccounts: []string{"default", "reloader-reloader", "coredns", "kube-proxy"},
			ConfigMaps: []string{"kube-root-ca.crt", "coredns", "kube-proxy"}},
			want: []string{"WARNING: Reloader's namespace reloader is shared: it holds 2 other ServiceAccounts and 2 other ConfigMaps besides Reloader's:",
				"ServiceAccounts: coredns, kube-proxy", "ConfigMaps: coredns, kube-proxy"},
			not: []string{"kube-root-ca.crt", "ServiceAccounts: default"}},
		{name: "a ConfigMap alone", n: &Neighbours{ServiceAccounts: own.ServiceAccounts, ConfigMaps: []string{"aws-auth"}},
			want: []string{"holds 1 other ConfigMap besides", "ConfigMaps: aws-auth"}, not: []string{"ServiceAccounts:"}},
		{name: "many ServiceAccounts", n: &Neighbours{ServiceAccounts: append([]string{"reloader-reloader"}, many...)},
			want: []string{"12 other ServiceAccounts", "saa, sab, sac, sad, sae, saf, sag, sah and 4 more"}},
		{name: "not listed", n: &Neighbours{Unread: "serviceaccounts is forbidden"},
			want: []string{"WARNING: the ServiceAccounts and ConfigMaps of Reloader's namespace reloader could not be listed", "(serviceaccounts is forbidden)"}},
		{name: "default ServiceAccount", n: &Neighbours{ServiceAccounts: []string{"default"}}, sa: "default",
			want: []string{"WARNING: Reloader runs as the default ServiceAccount of its namespace reloader:", "every pod of reloader without a ServiceAccount"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rel := Find([]appsv1.Deployment{*chartDeployment(t, fixture.ReloaderDefault)}, "")[0]
			if tt.sa != "" {
				rel.ServiceAccount = tt.sa
			}
			o, err := rel.Options()
			if err != nil {
				t.Fatal(err)
			}
			p := Calculate(Input{Reloader: rel, Options: o, Unread: "forbidden", Neighbours: tt.n,
				Install: Install{Image: "watcher:1", RBAC: "deploy/reloader", Command: "watcher migrate"}})
			var text bytes.Buffer
			if err := p.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			out := text.String()
			if tt.want == nil {
				if p.ImageSwap.Warning != nil || strings.Contains(out, "WARNING") {
					t.Errorf("a warning: %q", p.ImageSwap.Warning)
				}
				return
			}
			if len(p.ImageSwap.Warning) < 4 {
				t.Errorf("warning %q: want several lines", p.ImageSwap.Warning)
			}
			for _, s := range append(tt.want, "create\n   Secrets, ConfigMaps and Leases",
				"Kubernetes 1.30", "Prefer path 1 above: watcher's chart, in a namespace of its own.") {
				if !strings.Contains(out, s) {
					t.Errorf("text lacks %q", s)
				}
			}
			for _, s := range tt.not {
				if strings.Contains(strings.Join(p.ImageSwap.Warning, "\n"), s) {
					t.Errorf("warning names %q", s)
				}
			}
			// After the image swap's commands, before the notes.
			if i, j := strings.Index(out, "kubectl -n reloader set image"), strings.Index(out, "   WARNING: "); i < 0 || j < i {
				t.Errorf("the warning is not under the image swap:\n%s", out)
			}
			if t.Failed() {
				t.Logf("text:\n%s", out)
			}
		})
	}
}
