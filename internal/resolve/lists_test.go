package resolve_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/resolve"
)

// TestReloadListKinds: what a reload list resolves to, for each kind of
// entry: names name their object (no wildcard), names with dots and
// patterns also match the namespace's objects, a list over the limits
// resolves to nothing, and the pod template's list counts for a kind the
// workload names nothing of.
func TestReloadListKinds(t *testing.T) {
	all := configs{
		stored(refs.ConfigMap, "shop", "web-config"), stored(refs.ConfigMap, "shop", "web.config"),
		stored(refs.ConfigMap, "shop", "webxconfig"), stored(refs.ConfigMap, "shop", "app-1"),
		stored(refs.ConfigMap, "shop", "other"),
	}
	tests := []struct {
		name      string
		own, tmpl map[string]string
		wildcard  bool
		want      []string // ConfigMaps resolved
	}{
		{"names", map[string]string{optin.ConfigMapReload: "web-config, missing"}, nil, false, []string{"missing", "web-config"}},
		{"a name with a dot", map[string]string{optin.ConfigMapReload: "web.config"}, nil, true, []string{"web-config", "web.config", "webxconfig"}},
		{"a pattern", map[string]string{optin.ConfigMapReload: "app-.*"}, nil, true, []string{"app-1"}},
		{"over the limits", map[string]string{optin.ConfigMapReload: "web-config,app-.*," + strings.Repeat("x,", optin.MaxListEntries)}, nil, false, nil},
		{"a pattern over the limits", map[string]string{optin.ConfigMapReload: "web-config,a{1000}"}, nil, false, nil},
		{"the template's list, the workload naming Secrets", map[string]string{optin.SecretReload: "db"}, map[string]string{optin.ConfigMapReload: "app-.*"}, true, []string{"app-1"}},
		{"the template's list, the workload naming ConfigMaps", map[string]string{optin.ConfigMapReload: "other"}, map[string]string{optin.ConfigMapReload: "app-.*"}, false, []string{"other"}},
	}
	r := resolve.New(resolve.Options{Sources: []resolve.Source{resolve.Annotations{}}})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := deployment("shop")
			d.Spec.Template.Spec.Containers = nil
			d.Annotations, d.Spec.Template.Annotations = tt.own, tt.tmpl
			if got := len(r.Wildcards(d)) > 0; got != tt.wildcard {
				t.Errorf("wildcard = %v, want %v", got, tt.wildcard)
			}
			uses, err := r.Resolve(d, all)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, u := range uses {
				if u.Kind == refs.ConfigMap {
					got = append(got, u.Name)
				}
			}
			slices.Sort(got)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ConfigMaps (-want +got):\n%s", diff)
			}
		})
	}
}

// BenchmarkReloadListPerChange: the cost of one change of a ConfigMap in a
// namespace of 2,000 where 300 workloads have a reload list of 20 entries
// (each is resolved against the namespace when its list has patterns),
// for lists of patterns, of names with dots and of names.
func BenchmarkReloadListPerChange(b *testing.B) {
	const workloads, configMaps, entries = 300, 2000, 20
	var cs configs
	for i := 0; i < configMaps; i++ {
		cs = append(cs, stored(refs.ConfigMap, "team-a", fmt.Sprintf("cfg-%04d", i)))
	}
	for _, format := range []string{"app-%d-.*", "app.%d.config", "app-%d-config"} {
		var list []string
		for i := 0; i < entries; i++ {
			list = append(list, fmt.Sprintf(format, i))
		}
		d := deployment("team-a")
		d.Annotations = map[string]string{optin.ConfigMapReload: strings.Join(list, ",")}
		r := resolve.Standard(resolve.Settings{})
		b.Run(format, func(b *testing.B) {
			for b.Loop() {
				for i := 0; i < workloads; i++ {
					if _, err := r.Resolve(d, cs); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
