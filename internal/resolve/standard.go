package resolve

import (
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Settings are the settings of an installation of watcher that say which
// references count.
type Settings struct {
	// IgnoreConfigMapNamespaces and IgnoreSecretNamespaces: see Options.
	IgnoreConfigMapNamespaces, IgnoreSecretNamespaces []string
	// Sources are asked after watcher's own: those whose inputs live
	// outside this package (the ReloadPolicies' references, package
	// policy).
	Sources []Source
}

// Standard returns the Resolver of an installation: every source watcher
// reads, in order, less the ignored namespaces. The controller (its store's
// index and its reconciler) and the graph and explain commands all build
// their Resolver here, so that what the commands report is what the
// controller does: a source added here reaches all of them.
func Standard(s Settings) *Resolver {
	return New(Options{
		Sources:                   append([]Source{PodSpec{}, Annotations{}}, s.Sources...),
		IgnoreConfigMapNamespaces: s.IgnoreConfigMapNamespaces,
		IgnoreSecretNamespaces:    s.IgnoreSecretNamespaces,
	})
}

// Origin is one object a workload refers to, as Explain finds it: the
// merged reference, the sources that found it, and whether the ignored
// namespaces drop it.
type Origin struct {
	Ref refs.Ref
	// Sources are the names of the sources that found the object, in the
	// Resolver's order.
	Sources []string
	// Ignored is true when the object is in a namespace whose kind is
	// ignored: Refs leaves it out.
	Ignored bool
}

// Explain returns every object obj refers to, sorted as Resolve sorts
// them, with where each reference came from. The references not Ignored
// are exactly what Resolve(obj, configs) returns; a reference a source names
// in an ignored namespace is kept, marked Ignored (a match there is not
// expanded, as in Resolve).
func (r *Resolver) Explain(obj client.Object, configs Configs) ([]Origin, error) {
	if workload.Delegates(obj) {
		return nil, nil
	}
	var lists [][]refs.Ref
	found := map[string][]string{}
	add := func(source string, rs []refs.Ref) {
		lists = append(lists, rs)
		for _, ref := range rs {
			if !slices.Contains(found[ref.ID()], source) {
				found[ref.ID()] = append(found[ref.ID()], source)
			}
		}
	}
	for _, s := range r.sources {
		rs, err := s.Refs(obj)
		if err != nil {
			return nil, err
		}
		add(s.Name(), rs)
		matched, err := r.matched(obj, s, configs)
		if err != nil {
			return nil, err
		}
		for _, rs := range matched {
			add(s.Name(), rs)
		}
	}
	uses, err := r.narrow(obj, refs.Merge(lists...), configs)
	if err != nil {
		return nil, err
	}
	out := make([]Origin, 0, len(uses))
	for _, u := range uses {
		out = append(out, Origin{Ref: u, Sources: found[u.ID()], Ignored: r.isIgnored(u.Kind, obj.GetNamespace())})
	}
	return out, nil
}
