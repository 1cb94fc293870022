package policy

import (
	"strings"

	"github.com/watcher-dev/watcher/internal/packed"
	"github.com/watcher-dev/watcher/internal/slim"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Selected returns the workloads p applies to, from the store: its
// targets, or, when it lists none, the consumers of its sources; each
// once. Work is proportional to the workloads of p's namespace times its
// distinct target selectors (each kind listed once), to the objects of
// p's namespace that a source selector reads, and to the users of the
// objects it names (one index lookup each).
func Selected(p *Policy, st Workloads) ([]workload.Key, error) {
	var out []workload.Key
	if p.Targets != nil {
		sel := newSelection(p.Namespace, st)
		seen := map[workload.Key]bool{}
		for _, t := range p.Targets {
			keys, err := sel.of(t)
			if err != nil {
				return out, err
			}
			for _, k := range keys {
				if !seen[k] {
					seen[k] = true
					out = append(out, k)
				}
			}
		}
		return out, nil
	}
	for _, s := range p.Sources {
		names := []string{s.Name}
		if s.Selector != nil {
			objs, err := st.List(s.Kind, p.Namespace)
			if err != nil {
				return out, err
			}
			names = names[:0]
			for _, o := range objs {
				if s.Names(s.Kind, o.GetName(), slim.Labels(o)) {
					names = append(names, o.GetName())
				}
			}
		}
		for _, n := range names {
			users, err := st.UsersOf(s.Kind, p.Namespace, n)
			if err != nil {
				return out, err
			}
			out = append(out, users...)
		}
	}
	return out, nil
}

// selection answers which workloads of one namespace targets select,
// listing each kind of workload once and asking each distinct selector
// once: a policy's 100 targets by selector cost one pass over the
// namespace's workloads per distinct selector.
type selection struct {
	namespace string
	st        Workloads
	lists     map[string][]*packed.Object
	answers   map[string][]workload.Key
}

func newSelection(namespace string, st Workloads) *selection {
	return &selection{namespace: namespace, st: st,
		lists: map[string][]*packed.Object{}, answers: map[string][]workload.Key{}}
}

// of returns the workloads that t selects.
func (s *selection) of(t Target) ([]workload.Key, error) {
	if t.Selector == nil {
		obj, err := s.st.Get(t.Kind, s.namespace, t.Name)
		if err != nil || obj == nil {
			return nil, err
		}
		return []workload.Key{{Kind: t.Kind, Namespace: s.namespace, Name: t.Name}}, nil
	}
	key := t.Kind + "\x00" + t.selectorKey()
	if keys, ok := s.answers[key]; ok {
		return keys, nil
	}
	objs, ok := s.lists[t.Kind]
	if !ok {
		var err error
		if objs, err = s.st.Workloads(t.Kind, s.namespace); err != nil {
			return nil, err
		}
		s.lists[t.Kind] = objs
	}
	var out []workload.Key
	for _, o := range objs {
		if t.Selects(t.Kind, o.GetName(), slim.Labels(o)) {
			out = append(out, workload.Key{Kind: t.Kind, Namespace: s.namespace, Name: o.GetName()})
		}
	}
	s.answers[key] = out
	return out, nil
}

// selected returns the workloads that the policies of namespace apply to,
// each once: in one selection, each distinct target of the namespace
// (by name, or by kind and selector) asked once, whatever the number of
// policies that list it; then the consumers of the sources of the
// policies that list no targets.
func (ix *Index) selected(namespace string, st Workloads) ([]workload.Key, error) {
	var targets []Target
	var consumers []*Policy
	ix.mu.RLock()
	if v := ix.byNS[namespace]; v != nil {
		for kind, groups := range v.targetSels {
			for _, g := range groups {
				targets = append(targets, Target{Kind: kind, Selector: g.sel})
			}
		}
		for k := range v.targetNames {
			kind, name, _ := strings.Cut(k, "/")
			targets = append(targets, Target{Kind: kind, Name: name})
		}
		for _, p := range v.policies {
			if p.Refused == nil && p.Targets == nil {
				consumers = append(consumers, p)
			}
		}
	}
	ix.mu.RUnlock()
	sel := newSelection(namespace, st)
	seen := map[workload.Key]bool{}
	var out []workload.Key
	add := func(keys []workload.Key) {
		for _, k := range keys {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	for _, t := range targets {
		keys, err := sel.of(t)
		if err != nil {
			return out, err
		}
		add(keys)
	}
	for _, p := range consumers {
		keys, err := Selected(p, st)
		if err != nil {
			return out, err
		}
		add(keys)
	}
	return out, nil
}
