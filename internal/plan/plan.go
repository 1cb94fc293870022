// Package plan decides, from a workload and the current digests of the
// ConfigMaps and Secrets it uses, whether to restart it.
//
// Decide is pure: the caller gathers the inputs from its store and applies the
// result with one patch. A workload's Record holds, for each reference, which
// keys its pods read and the hash of each. First the rules (Input.Rules, a
// Chain) say which references count; then each reference not dropped is
// compared with the object as it is now:
//
//	object now             recorded                  written      a change?
//	present                no entry (new reference)  current      no: adopted
//	present                nil (did not exist)       current      only with RestartOnCreate
//	present                same hashes               current      no
//	present                other hashes              current      yes: the keys that differ
//	present                keys not read before      current      no: newly read keys are adopted
//	present, ignored by    anything                  current      no: recorded silently, listed
//	  a rule (opted out)                                          in Ignored
//	present, a required    anything                  kept as is   no, and no restart at all:
//	  key missing                                                 reported in Missing
//	missing                no entry                  nil          no
//	missing                anything                  kept as is   no: deletion never restarts,
//	                                                              unless ReloadOnDelete:
//	missing, ReloadOnDelete, optional  hashes        nil          yes: every key it had
//	missing, ReloadOnDelete, required  hashes        kept as is   no, and no restart at all:
//	                                                              reported in Missing
//	dropped by a rule      anything                  nothing      no
//
// A key is compared only when the record says the pods read it, and the pod
// spec still reads it: a template edit that reads one more key, or switches
// a volume from items to the whole object, rolls the pods itself and must not
// roll them a second time. Keys read from envFrom and whole volumes are every
// key of the object, so added and removed keys count. A required key (one a
// non-optional keyRef or volume item needs) that disappears is treated like
// the deletion of its object, and holds every restart of the workload: new
// pods could not start. Entries for references no longer in the pod spec are
// dropped. Then, for the workload:
//
//	workload              record      action
//	uses nothing (or      present     Forget: remove the record
//	  rules dropped all:
//	  opted out)
//	uses nothing          absent      None
//	uses only objects     absent      None (nothing to record: the workload
//	  that do not exist                 may never be restarted), unless
//	                                  RestartOnCreate
//	uses something        absent      Adopt: write the record, no rollout
//	uses something        present     Restart if any change; Refresh if only
//	                                  the record differs; None otherwise
//
// Records are kept under an annotation's size limit: when a record would
// exceed RecordBudget, the entries with the most keys are summarized, largest
// first, as one digest each (Entry.Digest).
package plan

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/watcher-dev/watcher/internal/refs"
)

// Config is the current state of one referenced ConfigMap or Secret.
type Config struct {
	// Present is false when the object does not exist (or is not watched).
	Present bool
	// Keys maps each key to its hash (hash.Digest.Keys).
	Keys map[string]string
	// Annotations and Labels are the object's, for the rules.
	Annotations, Labels map[string]string
	// Version is the object's resourceVersion, "" when not known.
	Version string
	// Sum is the keyed digest of its whole content (hash.Digest.Sum,
	// hex), "" when not known: it names its snapshot (package pin).
	Sum string
	// Type is a Secret's type, "" when not known (the store keeps none):
	// some types float (pin.Floats).
	Type string
}

// Input is everything Decide looks at.
type Input struct {
	// Rules say which references count (see NewChain); with none, all do.
	Rules Chain
	// Annotations are the workload's, for the rules.
	Annotations map[string]string
	// Policies holds the ID (refs.Ref.ID) of each reference that a
	// ReloadPolicy applying to the workload names (policy.Applied.Named),
	// for the rules: being a policy's target opts in.
	Policies map[string]bool
	// OptInOnly: the workload counts only what it opts in to, whatever the
	// discovery mode, as in the annotated mode (see NewChain): a Job,
	// which a restart deletes and creates again (workload.Kind.Recreate).
	OptInOnly bool
	// Controlled: the workload is opt-in only and has a controller (an
	// ownerReference with controller: true, a CronJob's Job): it is its
	// controller's, never restarted on its own (see NewChain).
	Controlled bool
	// Refs are the objects the workload's pod template uses.
	Refs []refs.Ref
	// Recorded is the workload's record; nil if it has none.
	Recorded Record
	// Version is the newest resourceVersion among the objects Recorded
	// was made from (ParseVersion), "" when not known.
	Version string
	// Configs holds the current state of each reference, keyed by Ref.ID().
	Configs map[string]Config
	// RestartOnCreate makes the creation of a referenced object that did
	// not exist a change.
	RestartOnCreate bool
	// ReloadOnDelete makes the deletion of a referenced object a change,
	// when pods can start without it (Ref.Optional); otherwise it holds
	// every restart, like a missing required key.
	ReloadOnDelete bool
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
	Ref refs.Ref
	// Keys are the keys that changed; nil when the entry is summarized
	// (Entry.Sum) and the keys cannot be told.
	Keys []string
	// Old and New are short hashes of the recorded and current entries.
	Old, New string
}

// Missing is a referenced object that lacks keys the pods need.
type Missing struct {
	Ref refs.Ref
	// Keys are the missing keys; nil when the object itself is gone.
	Keys []string
}

// Plan is Decide's result.
type Plan struct {
	Action Action
	// Record is the record to write for Adopt, Refresh and Restart.
	Record Record
	// Version is the newest resourceVersion among the objects Record is
	// made from, "" when one of them is not known (see VersionAnnotation).
	Version string
	// Changes are the reasons for a Restart, sorted by reference.
	Changes []Change
	// Ignored lists changes that did not count because a rule said to
	// record them silently (the object opted out).
	Ignored []Change
	// Missing lists required keys that are absent: while any is, nothing
	// restarts and the record is kept.
	Missing []Missing
}

// Decide returns the plan for one workload. See the package comment for the
// rules.
func Decide(in Input) Plan {
	next := make(Record, len(in.Refs))
	var p Plan
	anyUsed, anyPresent := false, false
	versions := newest{}
	for _, ref := range in.Refs {
		verdict, _ := in.Rules.Evaluate(in, ref)
		if verdict == Drop {
			continue
		}
		anyUsed = true
		id := ref.ID()
		cfg := in.Configs[id]
		old, known := in.Recorded[id]
		versions.add(cfg)
		if !cfg.Present {
			next[id] = old // nil when unknown: "did not exist"
			if in.ReloadOnDelete && old != nil {
				p.deleted(ref, old, next)
			}
			continue
		}
		anyPresent = true
		if lacks := missingKeys(ref, cfg.Keys); len(lacks) > 0 {
			p.Missing = append(p.Missing, Missing{Ref: ref, Keys: lacks})
			next[id] = old
			if !known {
				next[id] = entryFor(ref, cfg.Keys)
			} else {
				versions.unknown = true // kept from the record
			}
			continue
		}
		cur := entryFor(ref, cfg.Keys)
		next[id] = cur
		if !known || (old == nil && !in.RestartOnCreate) {
			continue
		}
		keys, changed := compare(ref, old, cur)
		if !changed {
			continue
		}
		c := Change{Ref: ref, Keys: keys, Old: old.Sum(), New: cur.Sum()}
		if verdict == Ignore {
			p.Ignored = append(p.Ignored, c)
		} else {
			p.Changes = append(p.Changes, c)
		}
	}
	if !anyUsed { // opted out, or uses nothing
		if in.Recorded != nil {
			return Plan{Action: Forget}
		}
		return Plan{Action: None}
	}
	byRef := func(a, b Change) int { return strings.Compare(a.Ref.ID(), b.Ref.ID()) }
	slices.SortFunc(p.Changes, byRef)
	slices.SortFunc(p.Ignored, byRef)
	switch {
	case in.Recorded == nil && !anyPresent && !in.RestartOnCreate:
		p.Action = None
	case in.Recorded == nil:
		p.Action, p.Record = Adopt, fit(next)
	case len(p.Missing) > 0:
		// Restarting would leave new pods stuck: keep the record as it
		// is, so that the changes count once the keys are back.
		p.Action, p.Changes = None, nil
	case len(p.Changes) > 0:
		p.Action, p.Record = Restart, fit(next)
	default:
		p.Record = fit(next)
		if equal(in.Recorded, p.Record) {
			p.Action, p.Record = None, nil
		} else {
			p.Action = Refresh
		}
	}
	if p.Record != nil {
		p.Version = versions.String()
	}
	return p
}

// StoreMayLag reports whether the restart p, decided from in, must be
// decided again from the objects read from the API server: unless every
// changed ConfigMap and Secret is, in the store, at least as new as the
// newest object the record was made from (in.Version), the record may have
// been written by a replica that saw newer content than the store holds,
// and restarting from the store would roll the workload back.
// resourceVersions are compared as Kubernetes defines it (comparable
// within a resource); any that cannot be compared means a read.
func StoreMayLag(in Input, p Plan) bool {
	if p.Action != Restart {
		return false
	}
	if in.Version == "" {
		return true
	}
	for _, c := range p.Changes {
		if c.Ref.Kind != refs.ConfigMap && c.Ref.Kind != refs.Secret {
			continue // nothing to read again
		}
		cfg := in.Configs[c.Ref.ID()]
		if !cfg.Present {
			return true // deleted in the store: maybe not on the server
		}
		if n, err := resourceversion.CompareResourceVersion(cfg.Version, in.Version); err != nil || n < 0 {
			return true
		}
	}
	return false
}

// newest finds the newest resourceVersion of the objects a record is made
// from, and whether every one is known: an entry kept from the record
// (its object absent or lacking keys in the store) has no version of its own.
type newest struct {
	max     string
	unknown bool
}

// add counts the object of cfg, an absent one, or one whose version
// cannot be compared, as not known.
func (v *newest) add(cfg Config) {
	if v.unknown {
		return
	}
	if !cfg.Present {
		v.unknown = true
		return
	}
	n, err := resourceversion.CompareResourceVersion(cfg.Version, cmp.Or(v.max, cfg.Version))
	switch {
	case err != nil:
		v.unknown = true
	case v.max == "" || n > 0:
		v.max = cfg.Version
	}
}

// String returns the newest version, "" when one is not known.
func (v *newest) String() string {
	if v.unknown {
		return ""
	}
	return v.max
}

// deleted takes the deletion of the object of ref, recorded as old, as a
// change when pods can start without the object, and as missing otherwise.
func (p *Plan) deleted(ref refs.Ref, old *Entry, next Record) {
	if !ref.Optional {
		p.Missing = append(p.Missing, Missing{Ref: ref})
		return
	}
	next[ref.ID()] = nil
	p.Changes = append(p.Changes, Change{Ref: ref, Keys: slices.Sorted(maps.Keys(old.Keys)), Old: old.Sum(), New: (*Entry)(nil).Sum()})
}

// missingKeys returns the keys ref requires that keys lacks.
func missingKeys(ref refs.Ref, keys map[string]string) []string {
	var out []string
	for _, k := range ref.Required {
		if _, ok := keys[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

// entryFor returns what a pod using ref reads from an object with keys.
func entryFor(ref refs.Ref, keys map[string]string) *Entry {
	if ref.AllKeys {
		e := &Entry{All: true, Keys: make(map[string]string, len(keys))}
		for k, h := range keys {
			e.Keys[k] = h
		}
		return e
	}
	e := &Entry{Keys: make(map[string]string, len(ref.Keys))}
	for _, k := range ref.Keys {
		e.Keys[k] = keys[k] // "" when absent: read, but not there
	}
	return e
}

// compare returns the keys that differ between the recorded entry old and
// the current entry cur of ref, counting only keys the pods read both then
// and now (CompareKeys), and whether anything changed. A summarized entry
// is compared as a whole, unless the pods went from reading some keys to
// all or back.
func compare(ref refs.Ref, old, cur *Entry) ([]string, bool) {
	if old != nil && old.Digest != "" {
		if old.All != cur.All {
			return nil, false
		}
		return nil, old.Digest != cur.summary()
	}
	var changed []string
	for _, d := range CompareKeys(ref, old, cur.Keys) {
		if d.Changed() {
			changed = append(changed, d.Key)
		}
	}
	return changed, len(changed) > 0
}

func equal(a, b Record) bool {
	if len(a) != len(b) {
		return false
	}
	for id, x := range a {
		y, ok := b[id]
		if !ok || !x.Equal(y) {
			return false
		}
	}
	return true
}
