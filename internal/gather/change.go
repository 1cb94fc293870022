package gather

import (
	"maps"
	"slices"

	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
)

// Change returns in with keys of the object ref changed: each key given a
// hash other than the one it has now (a key it lacks is added), the
// object present. plan.Decide on it says what a change of those keys
// does: Restarts reads the answer.
func Change(in plan.Input, ref refs.Ref, keys []string) plan.Input {
	cur := in.Configs[ref.ID()]
	next := maps.Clone(cur.Keys)
	if next == nil {
		next = map[string]string{}
	}
	for _, k := range keys {
		next[k] = "changed:" + cur.Keys[k] // a keyed hash never has a colon
	}
	cur.Present, cur.Keys = true, next
	in.Configs = maps.Clone(in.Configs)
	in.Configs[ref.ID()] = cur
	return in
}

// Restarts tells whether p restarts the workload for a change of one of
// keys of the object ref: p restarts, and one of them is among the keys p
// found changed in it (or its record's entry is summarized, and the
// workload reads one of them).
func Restarts(p plan.Plan, ref refs.Ref, keys []string) bool {
	if p.Action != plan.Restart {
		return false
	}
	for _, c := range p.Changes {
		if c.Ref.ID() != ref.ID() {
			continue
		}
		for _, k := range keys {
			if slices.Contains(c.Keys, k) || (c.Keys == nil && ref.Uses(k)) {
				return true
			}
		}
	}
	return false
}
