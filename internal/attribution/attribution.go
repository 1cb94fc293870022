// Package attribution tells who changed the data of a ConfigMap or Secret:
// the field managers (kubectl, helm, cert-manager, an operator...) whose
// managedFields entries own a part of its content.
//
// The API server keeps, per field manager, the fields it last wrote and
// when. watcher keeps, of an object's managedFields, only the entries that
// touch its content, as Writers: the manager's name and the time of its
// last write. They are encoded in one short annotation (Annotation) on the
// object kept in the cache, at most MaxWriters of them, newest first; the
// rest of managedFields is dropped on the way in.
//
//	managedFields entry owns                        kept
//	f:data, f:binaryData or f:stringData            yes: manager and time
//	anything else (labels, annotations, type...)    no
//	no time (an old server), no fields              no
//	more than MaxWriters such entries               the newest MaxWriters
//
// Ownership moves: when two managers take turns writing the same key with
// updates, the last one owns it and the other's entry disappears. So one
// object never tells the whole story; Changed tells who made one change
// (from the object before and after it), and a caller that wants everyone
// who wrote over a period (the flap detector) unions the answers.
// ChangedBy remembers, per object, the authors of its changes not handled
// yet (a burst coalesced into one change may have several).
package attribution

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotation holds the Writers of a ConfigMap or Secret kept in the cache.
// Like the digest annotations of package hash, its key is not a valid
// annotation key (two slashes), so no object from the API server can carry
// it.
const Annotation = "watcher.dev/digest/writers"

// MaxWriters is the most Writers kept per object.
const MaxWriters = 4

// maxManagerLen is the longest manager name kept; the API server refuses
// longer ones (128 characters).
const maxManagerLen = 128

// Writer is a field manager that owns part of an object's content.
type Writer struct {
	// Manager is the field manager's name.
	Manager string
	// Time is the time of its last write, to the second.
	Time time.Time
}

// FromManagedFields returns the writers of the content among entries: at
// most MaxWriters, newest first (by name on equal times).
func FromManagedFields(entries []metav1.ManagedFieldsEntry) []Writer {
	var out []Writer
	for _, e := range entries {
		if e.Time == nil || e.FieldsV1 == nil || !touchesData(e.FieldsV1.GetRawBytes()) {
			continue
		}
		out = append(out, Writer{Manager: clean(e.Manager), Time: e.Time.Time.Truncate(time.Second)})
	}
	sortWriters(out)
	if len(out) > MaxWriters {
		out = out[:MaxWriters]
	}
	return out
}

// owned is set when its field is in a fields set, whatever its value.
type owned bool

func (o *owned) UnmarshalJSON([]byte) error { *o = true; return nil }

// touchesData reports whether a FieldsV1 set owns part of the content.
// Only the top level is read: a label named "data" is "f:data" too, one
// level down, under "f:metadata".
func touchesData(raw []byte) bool {
	var f struct {
		Data       owned `json:"f:data"`
		BinaryData owned `json:"f:binaryData"`
		StringData owned `json:"f:stringData"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return false
	}
	return bool(f.Data || f.BinaryData || f.StringData)
}

// clean returns name, cut to maxManagerLen and with characters that are
// not printable replaced, so that it encodes on one line; interned, as the
// same few managers write most objects.
func clean(name string) string {
	if len(name) > maxManagerLen {
		name = name[:maxManagerLen]
	}
	if strings.IndexFunc(name, notPrintable) >= 0 {
		name = strings.Map(func(r rune) rune {
			if notPrintable(r) {
				return '?'
			}
			return r
		}, name)
	}
	return unique.Make(name).Value()
}

func notPrintable(r rune) bool { return !unicode.IsPrint(r) }

func sortWriters(ws []Writer) {
	slices.SortFunc(ws, func(a, b Writer) int {
		if c := b.Time.Compare(a.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Manager, b.Manager)
	})
}

// Encode writes ws as Annotation's value: "unixSeconds manager" lines.
func Encode(ws []Writer) string {
	var b strings.Builder
	for i, w := range ws {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(strconv.FormatInt(w.Time.Unix(), 10))
		b.WriteByte(' ')
		b.WriteString(w.Manager)
	}
	return b.String()
}

// Decode reads an Annotation value; malformed lines are left out.
func Decode(s string) []Writer {
	if s == "" {
		return nil
	}
	var out []Writer
	for line := range strings.SplitSeq(s, "\n") {
		sec, name, ok := strings.Cut(line, " ")
		n, err := strconv.ParseInt(sec, 10, 64)
		if !ok || err != nil {
			continue
		}
		out = append(out, Writer{Manager: unique.Make(name).Value(), Time: time.Unix(n, 0)})
	}
	return out
}

// Of returns the writers kept on an object of the cache.
func Of(obj metav1.Object) []Writer { return Decode(obj.GetAnnotations()[Annotation]) }

// Since returns the managers among ws that wrote at or after t, sorted.
func Since(ws []Writer, t time.Time) []string {
	var out []string
	for _, w := range ws {
		if !w.Time.Before(t.Truncate(time.Second)) {
			out = append(out, w.Manager)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Changed returns the managers that made the change from an object whose
// writers were old to one whose writers are cur, sorted: those whose entry
// is new or whose time moved. When none moved (a manager writing again
// within the same second), the newest writers of cur.
//
//	old                  cur                   Changed
//	a@10                 a@10, b@12            b
//	a@10                 b@12 (a lost the key) b
//	a@10                 a@11                  a
//	a@10                 a@10                  a (same second)
//	none                 none                  none
func Changed(old, cur []Writer) []string {
	was := make(map[string]time.Time, len(old))
	for _, w := range old {
		was[w.Manager] = w.Time
	}
	var out []string
	for _, w := range cur {
		if t, ok := was[w.Manager]; !ok || !t.Equal(w.Time) {
			out = append(out, w.Manager)
		}
	}
	if len(out) == 0 && len(cur) > 0 {
		newest := cur[0].Time
		for _, w := range cur {
			if w.Time.After(newest) {
				newest = w.Time
			}
		}
		return Since(cur, newest)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Join names managers for a message: "a", "a and b", "a, b and c".
func Join(managers []string) string {
	switch len(managers) {
	case 0:
		return "an unknown writer"
	case 1:
		return managers[0]
	}
	return strings.Join(managers[:len(managers)-1], ", ") + " and " + managers[len(managers)-1]
}
