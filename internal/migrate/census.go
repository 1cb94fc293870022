package migrate

import (
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/explain"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Workload is what the plan needs of one workload of the cluster.
type Workload struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// OptsIn: it opts in by one of Reloader's annotations (auto, the typed
	// autos, reload lists, search), read under Reloader's keys as the
	// running Reloader reads them (its custom keys renamed).
	OptsIn bool `json:"optsIn"`
	// Annotations are the Reloader annotation keys it carries (on itself or
	// its pod template), under Reloader's own names.
	Annotations []string `json:"annotations,omitempty"`
	// WithReloaderArgs: watcher started with Reloader's arguments and
	// environment restarts it on a change of something it uses.
	WithReloaderArgs bool `json:"withReloaderArgs"`
	// WithOwnValues: watcher installed with its own defaults (discovery
	// all, its ignored namespaces) restarts it; OwnValuesWhyNot says why
	// not, when it restarts with Reloader's arguments only.
	WithOwnValues   bool   `json:"withOwnValues"`
	OwnValuesWhyNot string `json:"ownValuesWhyNot,omitempty"`
	// Marks are Reloader's marks of a reload on its template: the
	// annotation reloader.stakater.com/last-reloaded-from, STAKATER_* env
	// variables.
	Marks []Mark `json:"marks,omitempty"`
}

// reloaderKeys are Reloader's annotations of workloads, by which it opts in
// or is configured.
var reloaderKeys = []string{optin.ReloaderAuto, optin.ConfigMapAuto, optin.SecretAuto, optin.ConfigMapReload, optin.SecretReload,
	optin.Search, optin.ConfigMapExclude, optin.SecretExclude, optin.PausePeriod, optin.RolloutStrategy,
	optin.SecretProviderClassAuto, optin.SecretProviderClassReload, optin.SecretProviderClassExclude}

// Census returns the workloads: objs as read, renamed those of objs with the
// Reloader's custom annotation keys (optin.Keys.Rename; objs itself when
// there are none), and the graphs of the renamed ones under watcher's
// settings with Reloader's arguments (withArgs) and under watcher's own
// defaults (ownValues, drawn from objs as read). Sorted by namespace, kind
// and name.
func Census(renamed []client.Object, withArgs, ownValues explain.Graph) []Workload {
	args, own := restarts(withArgs), restarts(ownValues)
	out := make([]Workload, 0, len(renamed))
	for _, obj := range renamed {
		kind, ok := workload.Of(obj)
		if !ok {
			continue
		}
		w := Workload{Kind: kind.Name(), Namespace: obj.GetNamespace(), Name: obj.GetName()}
		id := w.Kind + "/" + w.Namespace + "/" + w.Name
		w.WithReloaderArgs = args[id] == ""
		w.WithOwnValues = own[id] == ""
		if w.WithReloaderArgs && !w.WithOwnValues {
			w.OwnValuesWhyNot = own[id]
		}
		ann := optin.Of(obj)
		w.OptsIn = optsIn(ann)
		for _, k := range reloaderKeys {
			if _, own := ann[k]; own || hasTemplate(ann, k) {
				w.Annotations = append(w.Annotations, k)
			}
		}
		w.Marks = MarksOf(obj)
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b Workload) int {
		return strings.Compare(a.Namespace+"/"+a.Kind+"/"+a.Name, b.Namespace+"/"+b.Kind+"/"+b.Name)
	})
	return out
}

// restarts returns, per workload of g ("Kind/namespace/name"), "" when a
// change of something it uses restarts it, else why not.
func restarts(g explain.Graph) map[string]string {
	out := make(map[string]string, len(g.Workloads))
	for _, w := range g.Workloads {
		out[w.Kind+"/"+w.Namespace+"/"+w.Name] = whyNot(w)
	}
	return out
}

// whyNot says why a change of nothing w uses restarts it (the last
// reference's reason), or "" when one does.
func whyNot(w explain.GraphWorkload) string {
	if w.Excluded != "" {
		return w.Excluded
	}
	why := "it uses no ConfigMap or Secret"
	for _, u := range w.Uses {
		switch {
		case u.State == explain.StateNotWatched:
			why = fmt.Sprintf("%s %s is not watched: %s", u.Kind, u.Name, u.StateReason)
		case u.Verdict == plan.Count.String():
			return ""
		default:
			why = fmt.Sprintf("%s %s: rule %s", u.Kind, u.Name, u.Rule)
		}
	}
	return why
}

// optsIn tells whether ann (optin.Of) opts in by one of Reloader's
// annotations; watcher's own watcher.dev/auto does not count.
func optsIn(ann map[string]string) bool {
	theirs := make(map[string]string, len(ann))
	for k, v := range ann {
		if !strings.HasSuffix(k, optin.Auto) {
			theirs[k] = v
		}
	}
	for _, kind := range []refs.Kind{refs.ConfigMap, refs.Secret, refs.SecretProviderClass} {
		if optin.AutoFor(theirs, kind) == optin.On || len(optin.Names(theirs, kind)) > 0 || optin.HasPatterns(theirs, kind) ||
			optin.For(theirs, kind)[optin.Search] == "true" {
			return true
		}
	}
	return false
}

// hasTemplate tells whether ann (optin.Of) holds the pod template's
// annotation key.
func hasTemplate(ann map[string]string, key string) bool {
	for k := range ann {
		if k != key && strings.HasSuffix(k, "/"+key) {
			return true
		}
	}
	return false
}
