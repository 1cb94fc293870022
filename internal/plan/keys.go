package plan

import (
	"maps"
	"slices"

	"github.com/watcher-dev/watcher/internal/refs"
)

// KeyDiff is one key of a referenced object, compared between the entry a
// workload's record holds for the object and the object now (CompareKeys).
type KeyDiff struct {
	Key string
	// Old is its hash in the entry ("" for none); InRecord says whether
	// the entry names it.
	Old      string
	InRecord bool
	// New is its hash now ("" for none); Present says whether the object
	// has it.
	New     string
	Present bool
	// Read: the pods read it now (refs.Ref.Uses).
	Read bool
	// Counts: Decide compares it: the pods read it now, and read it when
	// the entry was made (the entry names it, or read every key, or the
	// object did not exist then).
	Counts bool
}

// Changed reports whether the key is a change: it counts, and its hash
// differs.
func (d KeyDiff) Changed() bool { return d.Counts && d.Old != d.New }

// CompareKeys compares, key by key and sorted, the entry old that a
// workload's record holds for the object of ref (nil: it did not exist)
// with keys, the object's keys now and their hashes: every key the pods
// read now (those ref names, or those the object has), and every key the
// entry names. Decide counts the changed ones (KeyDiff.Changed); explain
// shows them all. A summarized entry (Entry.Digest) holds no keys: it is
// compared as a whole, and CompareKeys returns nil.
func CompareKeys(ref refs.Ref, old *Entry, keys map[string]string) []KeyDiff {
	if old != nil && old.Digest != "" {
		return nil
	}
	all := old == nil || old.All // a created object: every key there now is new
	var was map[string]string
	if old != nil {
		was = old.Keys
	}
	names := map[string]bool{}
	for k := range keys {
		if ref.Uses(k) {
			names[k] = true
		}
	}
	if !ref.AllKeys {
		for _, k := range ref.Keys {
			names[k] = true
		}
	}
	for k := range was {
		names[k] = true
	}
	out := make([]KeyDiff, 0, len(names))
	for _, k := range slices.Sorted(maps.Keys(names)) {
		d := KeyDiff{Key: k, Read: ref.Uses(k)}
		d.Old, d.InRecord = was[k]
		d.New, d.Present = keys[k]
		d.Counts = d.Read && (d.InRecord || all)
		out = append(out, d)
	}
	return out
}
