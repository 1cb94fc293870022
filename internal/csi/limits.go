package csi

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/watcher-dev/watcher/internal/note"
)

// The limits on what watcher keeps of one SecretProviderClassPodStatus. A
// tenant who can write statuses (or whose SecretProviderClass makes the
// driver write long lists) writes them; watcher keeps per status at most
// MaxObjects ids of at most MaxIDBytes each and MaxObjectsBytes in all,
// whatever the status holds (the API server bounds an object to about
// 1.5 MiB, which the transform reads once and drops). Nothing over a limit
// is lost silently: a rotation of any object still restarts the workload,
// and the status is reported (a log line and watcher_errors_total
// {operation="csi-limit"} once per status and shape, a Warning Event
// ReasonOverLimit once per workload, class and shape).
//
//	what the status holds                  what watcher keeps
//	an id over MaxIDBytes, or with a       a printable stand-in: its first
//	  character that is not printable        32 characters quoted, "…" and
//	  (a newline, invalid UTF-8), or         a hash of the whole id (the
//	  equal to FoldedID                      version hash is of the whole id)
//	over MaxObjects objects, or ids over   the first ones by id that fit,
//	  MaxObjectsBytes in all                 one by one; the others as one
//	                                         object, FoldedID, whose hash is
//	                                         of all their ids and versions
//	a podName or secretProviderClassName   nothing: the status is refused
//	  that is not a DNS subdomain            (no real pod or class is named
//	  (253 bytes at most)                    so)
//
// So the record of a workload holds at most MaxObjects+1 keys per class,
// and plan.RecordBudget summarizes it further if needed.
const (
	// MaxObjects is the most objects of one status watched one by one.
	MaxObjects = 256
	// MaxIDBytes is the longest object id kept as is: the providers' ids
	// ("secret/name", a GCP resource name, a Vault path) are shorter.
	MaxIDBytes = 512
	// MaxObjectsBytes bounds the bytes of the ids of one status watched
	// one by one.
	MaxObjectsBytes = 32 << 10
	// FoldedID is the object that stands for the objects of a status over
	// MaxObjects or MaxObjectsBytes.
	FoldedID = "(other objects)"
)

// ReasonOverLimit is the Warning Event of a workload whose pods mount a
// class whose status is over a limit.
const ReasonOverLimit = "SecretProviderClassOverLimit"

// Over says how a status is over the limits; the zero value: it is not.
type Over struct {
	// Objects is the number of objects of the status.
	Objects int
	// Folded is the number of them watched together as FoldedID.
	Folded int
	// Shortened is the number of ids replaced by a stand-in.
	Shortened int
	// Refused says why the whole status is refused; "" if it is not.
	Refused string
}

// Any tells whether the status is over a limit.
func (o Over) Any() bool { return o != Over{} }

// Note says, for people, how a status is over the limits; status, pod
// and class are quoted and cut short, the whole cut to an Event note.
func (o Over) Note(status, pod, class string) string {
	var parts []string
	if o.Refused != "" {
		parts = append(parts, "refused: "+o.Refused)
	}
	if o.Folded > 0 {
		parts = append(parts, fmt.Sprintf("lists %d objects, over %d or %d bytes of ids: the first %d by id are watched one by one, the other %d together as %q (a rotation of any of them restarts the workload, without naming it)",
			o.Objects, MaxObjects, MaxObjectsBytes, o.Objects-o.Folded, o.Folded, FoldedID))
	}
	if o.Shortened > 0 {
		parts = append(parts, fmt.Sprintf("ids longer than %d bytes or not printable (%d of them) are named by their first characters and a hash", MaxIDBytes, o.Shortened))
	}
	return note.Truncate(fmt.Sprintf("SecretProviderClassPodStatus %s (pod %s, SecretProviderClass %s) %s",
		quote(status), quote(pod), quote(class), strings.Join(parts, "; ")))
}

// quote quotes the first 64 bytes of s at most.
func quote(s string) string { return note.Quote(s, 64) }

// safeID returns id when it may be kept and shown as is, else a printable
// stand-in no longer than about 350 bytes, and whether it is one.
func safeID(id string) (string, bool) {
	if len(id) <= MaxIDBytes && id != FoldedID && printable(id) {
		return id, false
	}
	sum := sha256.Sum256([]byte(id))
	return fmt.Sprintf("%.32q…%s", id, hex.EncodeToString(sum[:8])), true
}

// printable tells whether s is valid UTF-8 of graphic characters and
// spaces only.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsGraphic(r) {
			return false
		}
	}
	return true
}

// badName says why name cannot be the name of a pod or a
// SecretProviderClass; "" when it can.
func badName(field, name string) string {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Sprintf("%s %s is not a DNS subdomain", field, quote(name))
	}
	return ""
}

// entry is one object of a status, its id made safe.
type entry struct {
	id, hash string
}

// keep returns, of objs sorted by id, the objects watched one by one and
// the hash of the folded ones with their number (0: none folded).
func keep(objs []entry) (map[string]string, string, int) {
	out := map[string]string{}
	size := 0
	folded := sha256.New()
	n := 0
	for _, o := range objs {
		if _, dup := out[o.id]; dup {
			out[o.id] = o.hash // the last of equal ids, as before the limits
			continue
		}
		if n == 0 && len(out) < MaxObjects && size+len(o.id) <= MaxObjectsBytes {
			out[o.id] = o.hash
			size += len(o.id)
			continue
		}
		var l [8]byte
		for _, f := range []string{o.id, o.hash} {
			binary.BigEndian.PutUint64(l[:], uint64(len(f)))
			folded.Write(l[:])
			folded.Write([]byte(f))
		}
		n++
	}
	if n == 0 {
		return out, "", 0
	}
	return out, hex.EncodeToString(folded.Sum(nil)[:8]), n
}
