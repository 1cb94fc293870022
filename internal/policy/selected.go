package policy

import (
	"github.com/watcher-dev/watcher/internal/slim"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Selected returns the workloads p applies to, from the store: its
// targets, or, when it lists none, the consumers of its sources. Work is
// proportional to the objects of p's namespace that a selector reads, and
// to the users of the objects it names (one index lookup each).
func Selected(p *Policy, st Workloads) ([]workload.Key, error) {
	var out []workload.Key
	if p.Targets != nil {
		for _, t := range p.Targets {
			keys, err := targets(p.Namespace, t, st)
			if err != nil {
				return out, err
			}
			out = append(out, keys...)
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
				if s.Names(s.Kind, o.Name, slim.Labels(o)) {
					names = append(names, o.Name)
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

// targets returns the workloads of namespace that t selects.
func targets(namespace string, t Target, st Workloads) ([]workload.Key, error) {
	if t.Selector == nil {
		obj, err := st.Get(t.Kind, namespace, t.Name)
		if err != nil || obj == nil {
			return nil, err
		}
		return []workload.Key{{Kind: t.Kind, Namespace: namespace, Name: t.Name}}, nil
	}
	objs, err := st.Workloads(t.Kind, namespace)
	if err != nil {
		return nil, err
	}
	var out []workload.Key
	for _, o := range objs {
		if t.Selects(t.Kind, o.Name, slim.Labels(o)) {
			out = append(out, workload.Key{Kind: t.Kind, Namespace: namespace, Name: o.Name})
		}
	}
	return out, nil
}
