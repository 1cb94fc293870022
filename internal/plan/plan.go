// Package plan decides, from a workload and the current digests of the
// ConfigMaps and Secrets it uses, whether to restart it.
//
// Decide is pure: the caller gathers the inputs from its store and applies the
// result with one patch. A workload's Record holds the per-key hashes its pods
// were started with; each reference in its pod spec is compared with the
// object as it is now:
//
//	object now            recorded                   written        a change?
//	present               no entry (new reference)   current        no: adopted
//	present               nil (did not exist)        current        only with RestartOnCreate
//	present               same hashes                current        no
//	present               other hashes               current        yes: the keys that differ
//	present, opted out    anything                   current        no: recorded silently
//	missing               no entry                   nil            no
//	missing               anything                   kept as is     no: deletion never restarts
//
// Only the keys a reference reads take part (all of them for envFrom and
// whole volumes, so added and removed keys count). Entries for references no
// longer in the pod spec are dropped. Then, for the workload:
//
//	workload              record      action
//	opted out, or uses    present     Forget: remove the record
//	  nothing
//	opted out, or uses    absent      None
//	  nothing
//	uses something        absent      Adopt: write the record, no rollout
//	uses something        present     Restart if any change; Refresh if only
//	                                  the record differs; None otherwise
package plan

import (
	"maps"
	"slices"
	"strings"

	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/refs"
)

// Config is the current state of one referenced ConfigMap or Secret.
type Config struct {
	// Present is false when the object does not exist (or is not watched).
	Present bool
	// Keys maps each key to its hash (hash.Digest.Keys).
	Keys map[string]string
	// OptedOut is true when the object asks that its changes restart nothing.
	OptedOut bool
}

// Input is everything Decide looks at.
type Input struct {
	// OptedOut is true when the workload asks never to be restarted.
	OptedOut bool
	// Refs are the objects the workload's pod template uses.
	Refs []refs.Ref
	// Recorded is the workload's record; nil if it has none.
	Recorded Record
	// Configs holds the current state of each reference, keyed by Ref.ID().
	Configs map[string]Config
	// RestartOnCreate makes the creation of a referenced object that did
	// not exist a change.
	RestartOnCreate bool
}

// Action is what the caller must do.
type Action int

// The actions, from least to most disruptive.
const (
	// None: the workload is up to date.
	None Action = iota
	// Forget: remove the record (the workload opted out).
	Forget
	// Adopt: write the record of a workload seen for the first time.
	Adopt
	// Refresh: write the record; nothing the pods use changed.
	Refresh
	// Restart: write the record and roll the pod template.
	Restart
)

var actionNames = [...]string{"none", "forget", "adopt", "refresh", "restart"}

func (a Action) String() string { return actionNames[a] }

// Change is one referenced object whose keys changed.
type Change struct {
	Ref  refs.Ref
	Keys []string
	// Old and New are short hashes of the recorded and current entries.
	Old, New string
}

// Plan is Decide's result.
type Plan struct {
	Action Action
	// Record is the record to write for Adopt, Refresh and Restart.
	Record Record
	// Changes are the reasons for a Restart, sorted by reference.
	Changes []Change
	// Ignored lists changes that did not count because the object opted out.
	Ignored []Change
}

// Decide returns the plan for one workload. See the package comment for the
// rules.
func Decide(in Input) Plan {
	if in.OptedOut || len(in.Refs) == 0 {
		if in.Recorded != nil {
			return Plan{Action: Forget}
		}
		return Plan{Action: None}
	}
	next := make(Record, len(in.Refs))
	var p Plan
	for _, ref := range in.Refs {
		cfg := in.Configs[ref.ID()]
		old, known := in.Recorded[ref.ID()]
		if !cfg.Present {
			if known {
				next[ref.ID()] = old
			} else {
				next[ref.ID()] = nil
			}
			continue
		}
		cur := used(ref, cfg.Keys)
		next[ref.ID()] = cur
		if !known || (old == nil && !in.RestartOnCreate) {
			continue
		}
		keys := hash.ChangedKeys(old, cur)
		if len(keys) == 0 {
			continue
		}
		c := Change{Ref: ref, Keys: keys, Old: old.Sum(), New: cur.Sum()}
		if cfg.OptedOut {
			p.Ignored = append(p.Ignored, c)
		} else {
			p.Changes = append(p.Changes, c)
		}
	}
	p.Record = next
	byRef := func(a, b Change) int { return strings.Compare(a.Ref.ID(), b.Ref.ID()) }
	slices.SortFunc(p.Changes, byRef)
	slices.SortFunc(p.Ignored, byRef)
	switch {
	case in.Recorded == nil:
		p.Action = Adopt
	case len(p.Changes) > 0:
		p.Action = Restart
	case !equal(in.Recorded, next):
		p.Action = Refresh
	default:
		p.Action, p.Record = None, nil
	}
	return p
}

// used returns the hashes of the keys ref reads from an object with keys.
func used(ref refs.Ref, keys map[string]string) Entry {
	if ref.AllKeys {
		e := make(Entry, len(keys)) // never nil: nil means "did not exist"
		maps.Copy(e, keys)
		return e
	}
	e := make(Entry, len(ref.Keys))
	for _, k := range ref.Keys {
		if h, ok := keys[k]; ok {
			e[k] = h
		}
	}
	return e
}

func equal(a, b Record) bool {
	return maps.EqualFunc(a, b, func(x, y Entry) bool {
		return (x == nil) == (y == nil) && maps.Equal(x, y)
	})
}
