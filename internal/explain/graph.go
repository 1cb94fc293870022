package explain

import (
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/resolve"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Graph says which workloads use which ConfigMaps and Secrets. Its JSON
// form is stable: fields may be added, never renamed or removed.
type Graph struct {
	// Workloads are sorted by namespace, kind and name.
	Workloads []GraphWorkload `json:"workloads"`
	// Configs are the objects some workload refers to, sorted by
	// namespace, kind and name.
	Configs []GraphConfig `json:"configs"`
}

// GraphWorkload is one workload and what it uses.
type GraphWorkload struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Watched and Excluded: as in WorkloadReport.
	Watched  bool   `json:"watched"`
	Excluded string `json:"excluded,omitempty"`
	// Uses are the objects it refers to, as in WorkloadReport (no hashes).
	Uses []Use `json:"uses"`
	// Error, when set, says why its references could not be found.
	Error string `json:"error,omitempty"`
}

// GraphConfig is one object some workload refers to.
type GraphConfig struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// State is present, absent, unreadable or not-watched (as Use.State).
	State string `json:"state"`
	// UsedBy are its users, "Kind/name", sorted.
	UsedBy []string `json:"usedBy"`
}

// BuildGraph draws the graph of workloads. config returns what was read of
// the ConfigMap or Secret kind namespace/name (its metadata: Keys are not
// used).
func BuildGraph(s Settings, workloads []client.Object, config func(kind refs.Kind, namespace, name string) Config) Graph {
	g := Graph{Workloads: []GraphWorkload{}, Configs: []GraphConfig{}}
	used := map[string]*GraphConfig{}
	for _, obj := range workloads {
		kind, _ := workload.Of(obj)
		gw := GraphWorkload{Kind: kind.Name(), Namespace: obj.GetNamespace(), Name: obj.GetName(), Uses: []Use{}}
		gw.Excluded = s.watched(obj)
		gw.Watched = gw.Excluded == ""
		origins, err := s.Resolver.Explain(obj, s.configs())
		if err != nil {
			gw.Error = err.Error()
		}
		where := paths(obj, origins)
		in := s.input(obj, refsOf(origins))
		for _, o := range origins {
			key := obj.GetNamespace() + "/" + o.Ref.ID()
			cfg := config(o.Ref.Kind, obj.GetNamespace(), o.Ref.Name)
			u, _, _ := s.use(in, o, cfg, where[o.Ref.ID()])
			gw.Uses = append(gw.Uses, u)
			gc := used[key]
			if gc == nil {
				gc = &GraphConfig{Kind: u.Kind, Namespace: obj.GetNamespace(), Name: u.Name, State: u.State, UsedBy: []string{}}
				used[key] = gc
			}
			gc.UsedBy = append(gc.UsedBy, gw.Kind+"/"+gw.Name)
		}
		g.Workloads = append(g.Workloads, gw)
	}
	slices.SortFunc(g.Workloads, func(a, b GraphWorkload) int {
		return strings.Compare(a.Namespace+"/"+a.Kind+"/"+a.Name, b.Namespace+"/"+b.Kind+"/"+b.Name)
	})
	for _, gc := range used {
		slices.Sort(gc.UsedBy)
		g.Configs = append(g.Configs, *gc)
	}
	slices.SortFunc(g.Configs, func(a, b GraphConfig) int {
		return strings.Compare(a.Namespace+"/"+a.Kind+"/"+a.Name, b.Namespace+"/"+b.Kind+"/"+b.Name)
	})
	return g
}

// id names a node of the graph: "Kind/namespace/name".
func id(kind, namespace, name string) string { return fmt.Sprintf("%s/%s/%s", kind, namespace, name) }

// refsOf returns the references of origins that count (not ignored).
func refsOf(origins []resolve.Origin) []refs.Ref {
	var out []refs.Ref
	for _, o := range origins {
		if !o.Ignored {
			out = append(out, o.Ref)
		}
	}
	return out
}
