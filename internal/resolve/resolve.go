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
//	reload      the objects the workload's reload lists name (Annotations)
//	  lists
//	(to come)   ReloadPolicies that select the workload
//
//	reference                                   kept?
//	into a namespace whose kind is ignored      no (IGNORE_*_NAMESPACES)
//	anything else                               yes
//
// Every source is pure and reads only the workload it is given: a source
// whose inputs change on their own (a policy) must re-index the workloads
// it selects.
package resolve

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/optin"
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
// references silently.
func (r *Resolver) Refs(obj client.Object) ([]refs.Ref, error) {
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
		if !r.ignored[u.Kind][obj.GetNamespace()] {
			out = append(out, u)
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
// spec uses them or not: apps may read them through the API. Each entry that
// is an object name (optin.Names) is a reference to every key of that
// object, optional (pods start without it). Entries that are patterns find
// nothing here: they only decide whether references found otherwise count
// (package plan's rules).
type Annotations struct{}

// Name implements Source.
func (Annotations) Name() string { return "reload lists" }

// Refs implements Source. Invalid entries are left out, never an error: the
// reconciler reports them.
func (Annotations) Refs(obj client.Object) ([]refs.Ref, error) {
	ann := obj.GetAnnotations()
	var out []refs.Ref
	for _, kind := range []refs.Kind{refs.ConfigMap, refs.Secret} {
		for _, name := range optin.Names(ann, kind) {
			out = append(out, refs.Ref{Kind: kind, Name: name, AllKeys: true, Optional: true})
		}
	}
	return out, nil
}

func set(items []string) map[string]bool {
	m := make(map[string]bool, len(items))
	for _, it := range items {
		m[it] = true
	}
	return m
}
