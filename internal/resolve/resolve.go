// Package resolve says which ConfigMaps and Secrets a workload uses, for
// both the store's index (which workloads a change concerns) and the
// reconciler (what to compare), so that the two can never disagree.
//
// A workload's references are the union of what each Source finds, less
// the references watcher ignores:
//
//	source      finds
//	pod spec    env and envFrom of every container, volumes, projected
//	            volumes (package refs; on a stored workload, as cached)
//	reload      the objects the workload's reload lists name (Annotations):
//	  lists     exact names, and every object of the namespace a pattern
//	            entry matches
//	policies    the sources of the ReloadPolicies that target the
//	            workload (package policy)
//
// A Source names objects (Refs), and may also match them (a Matcher): a
// Match is a reference to every object of a kind in the workload's
// namespace that it accepts, present or future. The store indexes a
// workload by the objects it names and, when it has matches, under its
// namespace for that kind (Wildcards), so that a change of any object there
// finds it; Resolve then expands the matches against the objects of the
// namespace, read from the store (Configs): no LIST call, work proportional
// to the objects of that one namespace, and only for workloads that match.
//
//	reference                                   kept?
//	into a namespace whose kind is ignored      no (IGNORE_*_NAMESPACES)
//	by a match, to a snapshot (IsSnapshot)      no: a snapshot is never a
//	                                            source
//	by name, to a snapshot                      yes: pods read what their
//	                                            spec names
//	anything else                               yes
//
// A Source may also narrow (a Narrower) the references Resolve found: a
// policy source that lists keys makes only those keys of its object count.
// Narrowing changes keys, never which objects are referenced, so the
// store's index (Refs, Wildcards) needs none.
//
// Every source is pure and reads only the workload it is given: a source
// whose inputs change on their own (a policy) must re-index the workloads
// it selects.
package resolve

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/packed"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Source finds references of a workload.
type Source interface {
	// Name names the source in messages, e.g. "pod spec".
	Name() string
	// Refs returns the references the source finds for obj.
	Refs(obj client.Object) ([]refs.Ref, error)
}

// Matcher is a Source that also finds references by matching objects
// rather than naming them.
type Matcher interface {
	Source
	// Matches returns obj's matches; nil when it has none.
	Matches(obj client.Object) []Match
}

// Match is a reference to every object of Kind, in the workload's
// namespace, that Accepts.
type Match struct {
	Kind refs.Kind
	// Accepts tells whether the object cfg (as the store keeps it: name,
	// labels, the annotations kept) is referenced.
	Accepts func(cfg metav1.Object) bool
	// Ref is the reference made to each accepted object: its Kind and
	// Name are set from the object.
	Ref refs.Ref
}

// Narrower is a Source that also narrows the references Resolve finds.
type Narrower interface {
	Source
	// Narrow returns uses, the references of obj that count, with those
	// it narrows replaced; configs holds the objects of obj's namespace.
	Narrow(obj client.Object, uses []refs.Ref, configs Configs) ([]refs.Ref, error)
}

// Configs lists the ConfigMaps or Secrets of a namespace, as the store
// keeps them.
type Configs interface {
	List(kind refs.Kind, namespace string) ([]*packed.Object, error)
}

// Options configure a Resolver.
type Options struct {
	// Sources find references; nil: the pod spec only.
	Sources []Source
	// IgnoreConfigMapNamespaces and IgnoreSecretNamespaces: references to
	// objects of that kind in these namespaces are dropped.
	IgnoreConfigMapNamespaces, IgnoreSecretNamespaces []string
}

// Resolver gives the references of workloads.
type Resolver struct {
	sources []Source
	ignored map[refs.Kind]map[string]bool
}

// New returns a Resolver.
func New(o Options) *Resolver {
	sources := o.Sources
	if sources == nil {
		sources = []Source{PodSpec{}}
	}
	return &Resolver{sources: sources, ignored: map[refs.Kind]map[string]bool{
		refs.ConfigMap: set(o.IgnoreConfigMapNamespaces),
		refs.Secret:    set(o.IgnoreSecretNamespaces),
	}}
}

// Refs returns the references of obj that count, sorted, one per object.
// A source that fails fails the whole: a partial answer would drop
// references silently. A workload whose template lives in another object
// (workload.Delegates) has none: it is restarted through that object.
func (r *Resolver) Refs(obj client.Object) ([]refs.Ref, error) {
	if workload.Delegates(obj) {
		return nil, nil
	}
	lists := make([][]refs.Ref, 0, len(r.sources))
	for _, s := range r.sources {
		rs, err := s.Refs(obj)
		if err != nil {
			return nil, err
		}
		lists = append(lists, rs)
	}
	uses := lists[0]
	if len(lists) > 1 {
		uses = refs.Merge(lists...)
	}
	out := make([]refs.Ref, 0, len(uses))
	for _, u := range uses {
		if !r.isIgnored(u.Kind, obj.GetNamespace()) {
			out = append(out, u)
		}
	}
	return out, nil
}

// Wildcards returns the kinds for which obj has matches (see Matcher), in
// namespaces whose kind is not ignored: the store indexes obj under its
// namespace for each, so that a change of any object of that kind there
// reaches it.
func (r *Resolver) Wildcards(obj client.Object) []refs.Kind {
	if workload.Delegates(obj) {
		return nil
	}
	var out []refs.Kind
	for _, s := range r.sources {
		m, ok := s.(Matcher)
		if !ok {
			continue
		}
		for _, match := range m.Matches(obj) {
			if !r.isIgnored(match.Kind, obj.GetNamespace()) && !slices.Contains(out, match.Kind) {
				out = append(out, match.Kind)
			}
		}
	}
	return out
}

// Resolve returns the references of obj that count, as Refs does, and the
// objects among configs its matches accept, sorted, one per object, as the
// Narrowers narrow them.
func (r *Resolver) Resolve(obj client.Object, configs Configs) ([]refs.Ref, error) {
	uses, err := r.resolve(obj, configs)
	if err != nil {
		return nil, err
	}
	return r.narrow(obj, uses, configs)
}

// narrow returns uses as the Narrowers narrow them.
func (r *Resolver) narrow(obj client.Object, uses []refs.Ref, configs Configs) ([]refs.Ref, error) {
	var err error
	for _, s := range r.sources {
		if n, ok := s.(Narrower); ok {
			if uses, err = n.Narrow(obj, uses, configs); err != nil {
				return nil, err
			}
		}
	}
	return uses, nil
}

// resolve returns the references of obj that count and the objects among
// configs its matches accept.
func (r *Resolver) resolve(obj client.Object, configs Configs) ([]refs.Ref, error) {
	named, err := r.Refs(obj)
	if err != nil || workload.Delegates(obj) {
		return named, err
	}
	lists := [][]refs.Ref{named}
	for _, s := range r.sources {
		found, err := r.matched(obj, s, configs)
		if err != nil {
			return nil, err
		}
		lists = append(lists, found...)
	}
	if len(lists) == 1 {
		return named, nil
	}
	return refs.Merge(lists...), nil
}

// matched returns, for each match of s (if s is a Matcher) outside the
// namespaces whose kind is ignored, the objects among configs it accepts.
func (r *Resolver) matched(obj client.Object, s Source, configs Configs) ([][]refs.Ref, error) {
	m, ok := s.(Matcher)
	if !ok {
		return nil, nil
	}
	var out [][]refs.Ref
	for _, match := range m.Matches(obj) {
		if r.isIgnored(match.Kind, obj.GetNamespace()) {
			continue
		}
		found, err := expand(match, obj.GetNamespace(), configs)
		if err != nil {
			return nil, err
		}
		out = append(out, found)
	}
	return out, nil
}

// expand returns a reference to each object of namespace that match
// accepts, snapshots left out (IsSnapshot): whatever a pattern or selector
// says, a match never reaches a snapshot, so that pinning a match's objects
// never pins a snapshot of a snapshot.
func expand(match Match, namespace string, configs Configs) ([]refs.Ref, error) {
	objs, err := configs.List(match.Kind, namespace)
	if err != nil {
		return nil, err
	}
	var out []refs.Ref
	for _, o := range objs {
		if !IsSnapshot(o) && match.Accepts(o) {
			ref := match.Ref
			ref.Kind, ref.Name = match.Kind, o.GetName()
			out = append(out, ref)
		}
	}
	return out, nil
}

// PodSpec is the Source of the references in a workload's pod template.
type PodSpec struct{}

// Name implements Source.
func (PodSpec) Name() string { return "pod spec" }

// Refs implements Source.
func (PodSpec) Refs(obj client.Object) ([]refs.Ref, error) { return workload.Refs(obj) }

// Annotations is the Source of the ConfigMaps and Secrets a workload names in
// its reload lists (configmap.reloader.stakater.com/reload and
// secret.reloader.stakater.com/reload, see package optin), whether its pod
// spec uses them or not: apps may read them through the API, as Reloader
// assumes. Each entry that is an object name (optin.Names) is a reference to
// every key of that object, optional (pods start without it); a list with
// entries that are patterns also matches every object of the namespace that
// one of its entries matches (optin.Named).
type Annotations struct{}

// Name implements Source.
func (Annotations) Name() string { return "reload lists" }

// Refs implements Source. Invalid entries are left out, never an error: the
// reconciler reports them.
func (Annotations) Refs(obj client.Object) ([]refs.Ref, error) {
	ann := optin.Of(obj)
	var out []refs.Ref
	for _, kind := range []refs.Kind{refs.ConfigMap, refs.Secret} {
		for _, name := range optin.Names(ann, kind) {
			out = append(out, refs.Ref{Kind: kind, Name: name, AllKeys: true, Optional: true})
		}
	}
	return out, nil
}

// Matches implements Matcher: a reload list with pattern entries matches the
// objects they name, each a reference to every key, optional. Names are
// compared as strings and only pattern entries run a regular expression
// (package optin).
func (Annotations) Matches(obj client.Object) []Match {
	ann := optin.Of(obj)
	var out []Match
	for _, kind := range []refs.Kind{refs.ConfigMap, refs.Secret} {
		named := optin.Matcher(ann, kind) // parsed once, not once per object
		if named == nil {
			continue
		}
		out = append(out, Match{
			Kind:    kind,
			Accepts: func(cfg metav1.Object) bool { return named(cfg.GetName()) },
			Ref:     refs.Ref{AllKeys: true, Optional: true},
		})
	}
	return out
}

func set(items []string) map[string]bool {
	m := make(map[string]bool, len(items))
	for _, it := range items {
		m[it] = true
	}
	return m
}

// AllNamespaces, among the ignored namespaces of a kind, ignores the kind
// in every namespace.
const AllNamespaces = "*"

// isIgnored tells whether references of kind in namespace are ignored.
func (r *Resolver) isIgnored(kind refs.Kind, namespace string) bool {
	return r.ignored[kind][namespace] || r.ignored[kind][AllNamespaces]
}
