package policy

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/resolve"
	"github.com/watcher-dev/watcher/internal/slim"
	"github.com/watcher-dev/watcher/internal/workload"
)

// References is the resolve.Source of the references that policies give
// the workloads they target (see the package comment): a Matcher for the
// sources by selector, and a Narrower for the sources that list keys.
//
// The store's index functions must give the same answer for a stored
// object every time they are asked (client-go computes the entries to
// remove from the stored object): so a stored workload carries what the
// policies gave it when it was stored (Annotate, through the store's
// transform), in RefsAnnotation and MatchesAnnotation, and Refs and
// Matches read them there. A policy change writes them again on the
// workloads it selected before and selects after (Watcher, through
// store.Store.Reindex). A workload read from the API server has neither:
// Refs and Matches ask Index.
type References struct {
	Index *Index
}

// Annotations on a stored workload (keys with two slashes: no object from
// the API server can carry them), set only when a policy targets it.
const (
	// RefsAnnotation holds the references by name (refs.Encode).
	RefsAnnotation = "watcher.dev/cached/policy-refs"
	// MatchesAnnotation holds the kinds of which sources by selector
	// match objects, comma-separated.
	MatchesAnnotation = "watcher.dev/cached/policy-matches"
)

// Annotate records on obj, a stored workload, the references the policies
// give it now. The texts are worked out once per workload, label set and
// change of the namespace's policies (Index.recorded): a workload's status
// updates cost a map lookup.
func (r References) Annotate(obj *metav1.PartialObjectMetadata) {
	delete(obj.Annotations, RefsAnnotation)
	delete(obj.Annotations, MatchesAnnotation)
	rec := r.Index.recorded(obj, annotations)
	if rec.refs == "" && rec.matches == "" {
		return
	}
	if obj.Annotations == nil {
		obj.Annotations = map[string]string{}
	}
	if rec.refs != "" {
		obj.Annotations[RefsAnnotation] = rec.refs
	}
	if rec.matches != "" {
		obj.Annotations[MatchesAnnotation] = rec.matches
	}
}

// record is what Annotate records on a workload; "" for none.
type record struct{ refs, matches string }

// annotations returns what Annotate records on a workload the policies
// targeting select.
func annotations(targeting []*Policy) record {
	var out record
	if named := byName(targeting); len(named) > 0 {
		out.refs = refs.Encode(refs.Merge(named))
	}
	var kinds []string
	for _, m := range bySelector(targeting) {
		if !slices.Contains(kinds, string(m.Kind)) {
			kinds = append(kinds, string(m.Kind))
		}
	}
	if len(kinds) > 0 {
		slices.Sort(kinds)
		out.matches = strings.Join(kinds, ",")
	}
	return out
}

// stored tells whether obj is a workload as the store keeps it.
func stored(obj client.Object) bool {
	_, ok := obj.GetAnnotations()[workload.RefsAnnotation]
	return ok
}

var (
	_ resolve.Matcher  = References{}
	_ resolve.Narrower = References{}
)

// Name implements resolve.Source.
func (References) Name() string { return "reload policies" }

// Refs implements resolve.Source: a reference to each source by name of
// each policy that targets obj.
func (r References) Refs(obj client.Object) ([]refs.Ref, error) {
	if stored(obj) {
		s, ok := obj.GetAnnotations()[RefsAnnotation]
		if !ok {
			return nil, nil
		}
		return refs.Decode(s)
	}
	return byName(r.Index.Targeting(obj)), nil
}

// byName returns the references by name that the policies targeting a
// workload give it.
func byName(targeting []*Policy) []refs.Ref {
	var out []refs.Ref
	for _, p := range targeting {
		for _, s := range p.Sources {
			if s.Selector == nil {
				out = append(out, s.ref(s.Name))
			}
		}
	}
	return out
}

// Matches implements resolve.Matcher: each source by selector of each
// policy that targets obj matches the objects of its kind whose labels it
// selects. On a stored workload, the kinds are those recorded (the store
// indexes by them), each accepting what the policies select now.
func (r References) Matches(obj client.Object) []resolve.Match {
	live := bySelector(r.Index.Targeting(obj))
	if !stored(obj) {
		return live
	}
	s := obj.GetAnnotations()[MatchesAnnotation]
	if s == "" {
		return nil
	}
	var out []resolve.Match
	for _, kind := range strings.Split(s, ",") {
		var accept []resolve.Match
		for _, m := range live {
			if string(m.Kind) == kind {
				accept = append(accept, m)
			}
		}
		out = append(out, resolve.Match{
			Kind: refs.Kind(kind),
			Accepts: func(cfg metav1.Object) bool {
				return slices.ContainsFunc(accept, func(m resolve.Match) bool { return m.Accepts(cfg) })
			},
			Ref: refs.Ref{AllKeys: true, Optional: true},
		})
		if len(accept) > 0 {
			out[len(out)-1].Ref = accept[0].Ref
		}
	}
	return out
}

// bySelector returns the matches that the policies targeting a workload
// give it.
func bySelector(targeting []*Policy) []resolve.Match {
	var out []resolve.Match
	for _, p := range targeting {
		for _, s := range p.Sources {
			if s.Selector == nil {
				continue
			}
			sel := s.Selector
			out = append(out, resolve.Match{
				Kind:    s.Kind,
				Accepts: func(cfg metav1.Object) bool { return sel.Matches(slim.Labels(cfg)) },
				Ref:     s.ref(""),
			})
		}
	}
	return out
}

// Narrow implements resolve.Narrower: a reference to an object that the
// sources of the policies applying to obj name, all with keys, reads only
// those keys. The keys the pod spec requires stay required, so that a
// restart still waits while one is missing.
func (r References) Narrow(obj client.Object, uses []refs.Ref, configs resolve.Configs) ([]refs.Ref, error) {
	a, err := r.Index.For(obj, uses, configs)
	if err != nil || len(a.Policies) == 0 {
		return uses, err
	}
	lbls := &labelsOf{configs: configs, namespace: obj.GetNamespace()}
	out := make([]refs.Ref, 0, len(uses))
	for _, u := range uses {
		keys, narrowed, err := a.keys(u, lbls)
		if err != nil {
			return nil, err
		}
		if narrowed {
			u.AllKeys, u.Keys = false, keys
		}
		out = append(out, u)
	}
	return out, nil
}

// keys returns the keys of u's object that count for a's policies, and
// whether they narrow u: only when every policy source naming the object
// lists keys (one that lists none counts every key).
func (a Applied) keys(u refs.Ref, lbls *labelsOf) ([]string, bool, error) {
	var keys []string
	found := false
	for _, p := range a.Policies {
		s, ok, err := p.source(u, lbls)
		if err != nil {
			return nil, false, err
		}
		if !ok {
			continue
		}
		if s.Keys == nil {
			return nil, false, nil
		}
		found = true
		keys = append(keys, s.Keys...)
	}
	if !found {
		return nil, false, nil
	}
	return sortedSet(keys), true, nil
}
