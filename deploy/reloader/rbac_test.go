package reloader_test

import (
	"strings"
	"testing"

	"github.com/watcher-dev/watcher/deploy/reloader"
)

// TestRBAC: the RBAC is given for Reloader's namespace and ServiceAccount,
// everywhere they appear, and nowhere else.
func TestRBAC(t *testing.T) {
	for _, tc := range []struct {
		name       string
		namespaced bool
		kinds      []string
	}{
		{name: "global", kinds: []string{"kind: ClusterRole\n", "kind: ClusterRoleBinding", "kind: Role\n", "kind: RoleBinding"}},
		{name: "namespaced", namespaced: true, kinds: []string{"kind: Role\n", "kind: RoleBinding"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as := reloader.RBAC("reloader", "reloader-reloader", tc.namespaced)
			got := reloader.RBAC("tools", "rl", tc.namespaced)
			for _, k := range tc.kinds {
				if !strings.Contains(got, k) {
					t.Errorf("no %q", k)
				}
			}
			if tc.namespaced && strings.Contains(got, "ClusterRole") {
				t.Error("a ClusterRole in the namespaced RBAC")
			}
			for _, gone := range []string{"namespace: reloader\n", "name: reloader-reloader\n"} {
				if strings.Contains(got, gone) {
					t.Errorf("%q left", gone)
				}
			}
			if n, want := strings.Count(got, "namespace: tools\n"), strings.Count(as, "namespace: reloader\n"); n != want || n == 0 {
				t.Errorf("namespace: tools %d times, want %d", n, want)
			}
			if n, want := strings.Count(got, "name: rl\n"), strings.Count(as, "name: reloader-reloader\n"); n != want || n == 0 {
				t.Errorf("name: rl %d times, want %d", n, want)
			}
		})
	}
}
