package policy

import (
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/resolve"
	"github.com/watcher-dev/watcher/internal/slim"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Index holds the policies of the watched namespaces, by namespace. It is
// safe for concurrent use; a nil or empty Index holds no policy.
type Index struct {
	mu   sync.RWMutex
	byNS map[string]map[string]*Policy
}

// NewIndex returns an empty Index.
func NewIndex() *Index { return &Index{byNS: map[string]map[string]*Policy{}} }

// Set adds or replaces p and returns the policy it replaces, if any.
func (ix *Index) Set(p *Policy) *Policy {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ns := ix.byNS[p.Namespace]
	if ns == nil {
		ns = map[string]*Policy{}
		ix.byNS[p.Namespace] = ns
	}
	old := ns[p.Name]
	ns[p.Name] = p
	return old
}

// Delete removes the policy namespace/name and returns it, if it was there.
func (ix *Index) Delete(namespace, name string) *Policy {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	old := ix.byNS[namespace][name]
	delete(ix.byNS[namespace], name)
	if len(ix.byNS[namespace]) == 0 {
		delete(ix.byNS, namespace)
	}
	return old
}

// Clear removes every policy and returns them.
func (ix *Index) Clear() []*Policy {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	var out []*Policy
	for _, ns := range ix.byNS {
		for _, p := range ns {
			out = append(out, p)
		}
	}
	ix.byNS = map[string]map[string]*Policy{}
	return out
}

// Get returns the policy namespace/name, or nil.
func (ix *Index) Get(namespace, name string) *Policy {
	if ix == nil {
		return nil
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.byNS[namespace][name]
}

// In returns the policies of namespace, sorted by name.
func (ix *Index) In(namespace string) []*Policy {
	if ix == nil {
		return nil
	}
	ix.mu.RLock()
	ns := ix.byNS[namespace]
	out := make([]*Policy, 0, len(ns))
	for _, p := range ns {
		out = append(out, p)
	}
	ix.mu.RUnlock()
	slices.SortFunc(out, func(a, b *Policy) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Applied is what the policies that apply to one workload say (see the
// package comment for how several combine).
type Applied struct {
	// Policies apply to the workload, sorted by name.
	Policies []*Policy
	// Named holds the ID (refs.Ref.ID) of each reference of the workload
	// that one of Policies names: those count in the annotated discovery
	// mode.
	Named map[string]bool
	// Strategy is the first strategy set; "" for none.
	Strategy string
	// DryRun: the workload must not be written.
	DryRun bool
	// names holds, for each of Policies, the IDs of the references it
	// names.
	names []map[string]bool
}

// Naming returns the policies of a that name one of the references ids
// (the changes a restart is for).
func (a Applied) Naming(ids []string) []*Policy {
	var out []*Policy
	for i, p := range a.Policies {
		if slices.ContainsFunc(ids, func(id string) bool { return a.names[i][id] }) {
			out = append(out, p)
		}
	}
	return out
}

// Coalesce returns the longest coalesce of the policies of the namespace
// of obj, a ConfigMap or Secret of kind, that name it among their sources:
// how long its changes are held, counted from the first; 0 for none.
func (ix *Index) Coalesce(kind refs.Kind, obj client.Object) time.Duration {
	var out time.Duration
	for _, p := range ix.In(obj.GetNamespace()) {
		if p.Coalesce <= out {
			continue
		}
		if slices.ContainsFunc(p.Sources, func(s Source) bool { return s.Names(kind, obj.GetName(), slim.Labels(obj)) }) {
			out = p.Coalesce
		}
	}
	return out
}

// For returns what the policies of obj's namespace that apply to obj, a
// workload whose references are uses, say. configs gives the labels of the
// objects a source selector may match.
func (ix *Index) For(obj client.Object, uses []refs.Ref, configs resolve.Configs) (Applied, error) {
	var a Applied
	policies := ix.In(obj.GetNamespace())
	if len(policies) == 0 {
		return a, nil
	}
	spec, err := workload.Refs(obj)
	if err != nil {
		return a, err
	}
	lbls := &labelsOf{configs: configs, namespace: obj.GetNamespace()}
	for _, p := range policies {
		applies := p.Targeting(obj)
		if !applies && p.Targets == nil {
			if applies, err = p.consumes(spec, lbls); err != nil {
				return a, err
			}
		}
		if !applies {
			continue
		}
		a.Policies = append(a.Policies, p)
		a.DryRun = a.DryRun || p.DryRun
		if a.Strategy == "" {
			a.Strategy = p.Strategy
		}
		named := map[string]bool{}
		for _, u := range uses {
			names, err := p.names(u, lbls)
			if err != nil {
				return a, err
			}
			if names {
				if a.Named == nil {
					a.Named = map[string]bool{}
				}
				a.Named[u.ID()] = true
				named[u.ID()] = true
			}
		}
		a.names = append(a.names, named)
	}
	return a, nil
}

// consumes tells whether a pod spec using spec uses an object a source of
// p names.
func (p *Policy) consumes(spec []refs.Ref, lbls *labelsOf) (bool, error) {
	for _, u := range spec {
		names, err := p.names(u, lbls)
		if names || err != nil {
			return names, err
		}
	}
	return false, nil
}

// names tells whether a source of p names the object of u.
func (p *Policy) names(u refs.Ref, lbls *labelsOf) (bool, error) {
	_, ok, err := p.source(u, lbls)
	return ok, err
}

// source returns the sources of p that name the object of u, merged: keys
// nil when one of them counts every key.
func (p *Policy) source(u refs.Ref, lbls *labelsOf) (Source, bool, error) {
	var out Source
	found := false
	for _, s := range p.Sources {
		if s.Kind != u.Kind {
			continue
		}
		var l labels.Labels
		if s.Selector != nil {
			var err error
			if l, err = lbls.get(u.Kind, u.Name); err != nil {
				return out, false, err
			}
		}
		if !s.Names(u.Kind, u.Name, l) {
			continue
		}
		switch {
		case !found:
			out, found = s, true
		case out.Keys == nil || s.Keys == nil:
			out.Keys = nil
		default:
			out.Keys = sortedSet(append(slices.Clone(out.Keys), s.Keys...))
		}
	}
	return out, found, nil
}

// labelsOf reads the labels of the ConfigMaps and Secrets of a namespace,
// listing each kind once, and only if a selector asks.
type labelsOf struct {
	configs   resolve.Configs
	namespace string
	byKind    map[refs.Kind]map[string]labels.Labels
}

func (l *labelsOf) get(kind refs.Kind, name string) (labels.Labels, error) {
	if l.configs == nil {
		return nil, nil
	}
	if l.byKind == nil {
		l.byKind = map[refs.Kind]map[string]labels.Labels{}
	}
	m, ok := l.byKind[kind]
	if !ok {
		objs, err := l.configs.List(kind, l.namespace)
		if err != nil {
			return nil, err
		}
		m = make(map[string]labels.Labels, len(objs))
		for _, o := range objs {
			m[o.Name] = slim.Labels(o)
		}
		l.byKind[kind] = m
	}
	return m[name], nil
}

// sortedSet returns items sorted, each once.
func sortedSet(items []string) []string {
	return slices.Compact(slices.Sorted(slices.Values(items)))
}
