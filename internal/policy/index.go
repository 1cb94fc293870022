package policy

import (
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/packed"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/resolve"
	"github.com/watcher-dev/watcher/internal/slim"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Index holds the policies of the watched namespaces, by namespace, each
// namespace indexed as its policies change (see view) so that the
// questions asked on every workload event (Targeting, For) cost work
// proportional to the policies that answer them. It is safe for
// concurrent use; a nil or empty Index holds no policy.
type Index struct {
	mu   sync.RWMutex
	byNS map[string]*view
}

// NewIndex returns an empty Index.
func NewIndex() *Index { return &Index{byNS: map[string]*view{}} }

// Set adds or replaces p and returns the policy it replaces, if any.
func (ix *Index) Set(p *Policy) *Policy {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	v := ix.byNS[p.Namespace]
	if v == nil {
		v = newView()
		ix.byNS[p.Namespace] = v
	}
	old := v.policies[p.Name]
	v.remove(p.Name)
	v.add(p)
	return old
}

// Delete removes the policy namespace/name and returns it, if it was there.
func (ix *Index) Delete(namespace, name string) *Policy {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	v := ix.byNS[namespace]
	if v == nil {
		return nil
	}
	old := v.policies[name]
	v.remove(name)
	if len(v.policies) == 0 {
		delete(ix.byNS, namespace)
	}
	return old
}

// Clear removes every policy and returns them.
func (ix *Index) Clear() []*Policy {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	var out []*Policy
	for _, v := range ix.byNS {
		for _, p := range v.policies {
			out = append(out, p)
		}
	}
	ix.byNS = map[string]*view{}
	return out
}

// Keys returns the key ("namespace/name") of every policy, in no order.
func (ix *Index) Keys() []string {
	if ix == nil {
		return nil
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var out []string
	for _, v := range ix.byNS {
		for _, p := range v.policies {
			out = append(out, p.Key())
		}
	}
	return out
}

// Get returns the policy namespace/name, or nil.
func (ix *Index) Get(namespace, name string) *Policy {
	if ix == nil {
		return nil
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if v := ix.byNS[namespace]; v != nil {
		return v.policies[name]
	}
	return nil
}

// In returns the policies of namespace, sorted by name, refused ones
// included.
func (ix *Index) In(namespace string) []*Policy {
	if ix == nil {
		return nil
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	v := ix.byNS[namespace]
	if v == nil {
		return nil
	}
	return slices.Clone(v.all())
}

// Targeting returns the policies of obj's namespace with a target that
// selects obj, a workload, sorted by name.
func (ix *Index) Targeting(obj client.Object) []*Policy {
	if ix == nil {
		return nil
	}
	k, ok := workload.Of(obj)
	if !ok {
		return nil
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	v := ix.byNS[obj.GetNamespace()]
	if v == nil {
		return nil
	}
	lbls, lkey := labelsKey(obj)
	return v.get(v.targeting(k.Name(), obj.GetName(), lbls, lkey))
}

// labelsKey returns the labels of obj and a text that tells label sets
// apart: the stored encoding, or the labels printed.
func labelsKey(obj metav1.Object) (labels.Labels, labelsText) {
	if s, ok := packed.Annotation(obj, slim.LabelsAnnotation); ok {
		return slim.Labels(obj), labelsText{stored: true, text: s}
	}
	set := labels.Set(obj.GetLabels())
	return set, labelsText{text: set.String()}
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
	// Settle and SettleMax are the longest set; 0: none.
	Settle, SettleMax time.Duration
	// Pin: one of Policies pins the workload's config revisions.
	Pin bool
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
	if ix == nil {
		return 0
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	v := ix.byNS[obj.GetNamespace()]
	if v == nil {
		return 0
	}
	var out time.Duration
	for _, p := range v.coalescing {
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
	lbls := &labelsOf{configs: configs, namespace: obj.GetNamespace()}
	policies, err := ix.applying(obj, lbls)
	if err != nil || len(policies) == 0 {
		return a, err
	}
	for _, p := range policies {
		a.Policies = append(a.Policies, p)
		a.DryRun = a.DryRun || p.DryRun
		a.Pin = a.Pin || p.Pin
		a.Settle, a.SettleMax = max(a.Settle, p.Settle), max(a.SettleMax, p.SettleMax)
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

// applying returns the policies that apply to obj, a workload, sorted by
// name: those with a target that selects it, and those without targets
// whose sources name an object its pod spec uses.
func (ix *Index) applying(obj client.Object, lbls *labelsOf) ([]*Policy, error) {
	if ix == nil {
		return nil, nil
	}
	k, ok := workload.Of(obj)
	if !ok {
		return nil, nil
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	v := ix.byNS[obj.GetNamespace()]
	if v == nil {
		return nil, nil
	}
	own, lkey := labelsKey(obj)
	names := v.targeting(k.Name(), obj.GetName(), own, lkey)
	if len(v.sourceNames) > 0 || len(v.sourceSels) > 0 {
		spec, err := workload.Refs(obj)
		if err != nil {
			return nil, err
		}
		using := map[string]bool{}
		for _, u := range spec {
			ns, err := v.using(u.Kind, u.Name, func() (labels.Labels, labelsText, error) { return lbls.key(u.Kind, u.Name) })
			if err != nil {
				return nil, err
			}
			for _, n := range ns {
				using[n] = true
			}
		}
		names = union(names, using)
	}
	return v.get(names), nil
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
	byKind    map[refs.Kind]map[string]*packed.Object
}

// get returns the labels of the object kind/name; nil when it does not
// exist (or no configs were given).
func (l *labelsOf) get(kind refs.Kind, name string) (labels.Labels, error) {
	lbls, _, err := l.key(kind, name)
	return lbls, err
}

// key returns the labels of the object kind/name and a text that tells
// label sets apart (see labelsKey).
func (l *labelsOf) key(kind refs.Kind, name string) (labels.Labels, labelsText, error) {
	if l.configs == nil {
		return nil, labelsText{}, nil
	}
	if l.byKind == nil {
		l.byKind = map[refs.Kind]map[string]*packed.Object{}
	}
	m, ok := l.byKind[kind]
	if !ok {
		objs, err := l.configs.List(kind, l.namespace)
		if err != nil {
			return nil, labelsText{}, err
		}
		m = make(map[string]*packed.Object, len(objs))
		for _, o := range objs {
			m[o.GetName()] = o
		}
		l.byKind[kind] = m
	}
	o := m[name]
	if o == nil {
		return nil, labelsText{}, nil
	}
	lbls, lkey := labelsKey(o)
	return lbls, lkey, nil
}

// sortedSet returns items sorted, each once.
func sortedSet(items []string) []string {
	return slices.Compact(slices.Sorted(slices.Values(items)))
}
