package plan

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	stdhash "hash"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// Annotations watcher writes on workloads.
const (
	// RecordAnnotation, on the workload's metadata, holds its Record as JSON.
	RecordAnnotation = "watcher.dev/config-hashes"
	// RestartAnnotation, on the pod template, is set to RestartID(record) on
	// every restart. Being derived from the hashes alone, writing it twice
	// for the same configuration changes nothing and rolls nothing.
	RestartAnnotation = "watcher.dev/restarted-for"
	// HashKeyAnnotation, on the workload's metadata, names the key the
	// record's hashes were made with (hash.Hasher.ID). A record made with
	// another key cannot be compared and is adopted again.
	HashKeyAnnotation = "watcher.dev/hash-key"
	// VersionAnnotation, on the workload's metadata, holds the newest
	// resourceVersion among the objects the record was made from, and the
	// record's RestartID, which binds it to that record
	// ("<resourceVersion>/<RestartID>", see FormatVersion). A restart
	// decided from a store at least that new needs no read of the changed
	// objects from the API server first (StoreMayLag).
	VersionAnnotation = "watcher.dev/config-version"
)

// Record is what a workload's pods were started with: for each ConfigMap or
// Secret they use, keyed "Kind/name", the keys they read and the hash of
// each. A nil Entry means the object did not exist.
type Record map[string]*Entry

// Entry is what a workload reads from one object.
type Entry struct {
	// All is true when the pods read every key of the object (envFrom, a
	// whole volume): Keys then holds every key the object had.
	All bool `json:"all,omitempty"`
	// Keys maps each key read to its hash; "" for a key read but absent.
	Keys map[string]string `json:"keys,omitempty"`
	// Digest, when set, stands in for Keys, which are then not recorded: one
	// digest of every key read and its hash, for records that would not
	// fit in an annotation otherwise.
	Digest string `json:"sum,omitempty"`
}

// RecordBudget is the size above which a record is shrunk by summarizing
// its largest entries: all of a workload's annotations together must stay
// under 256 KiB, and the record leaves room for the others.
const RecordBudget = 64 << 10

// ParseRecord decodes a RecordAnnotation value.
func ParseRecord(s string) (Record, error) {
	var r Record
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return nil, fmt.Errorf("parse %s: %w", RecordAnnotation, err)
	}
	if r == nil {
		r = Record{}
	}
	return r, nil
}

// String encodes r for RecordAnnotation. Map keys are sorted, so equal
// records encode to equal strings.
func (r Record) String() string {
	b, _ := json.Marshal(r) // maps of strings and bools always marshal
	return string(b)
}

// RestartID is the value of RestartAnnotation for r: a short hash of its
// canonical encoding.
func (r Record) RestartID() string { return shortSum(r.String()) }

// FormatVersion returns the value of VersionAnnotation for r, made from
// objects whose newest resourceVersion is version; nil (the annotation
// removed) when version is "".
func FormatVersion(r Record, version string) any {
	if version == "" {
		return nil
	}
	return version + "/" + r.RestartID()
}

// ParseVersion returns the resourceVersion of a VersionAnnotation value s
// if it was written with the record r, "" otherwise: a value written by
// hand, or left by a writer that changed the record and not the version,
// is not trusted.
func ParseVersion(s string, r Record) string {
	version, id, ok := strings.Cut(s, "/")
	if !ok || len(version) > maxVersion || r == nil || id != r.RestartID() {
		return ""
	}
	if _, err := resourceversion.CompareResourceVersion(version, version); err != nil {
		return ""
	}
	return version
}

// maxVersion bounds the resourceVersion read from a workload's annotation,
// which its owner can write: etcd's are 64-bit integers.
const maxVersion = 20

// Sum returns a short hash of e, for messages ("1a2b3c4d→5e6f7a8b").
func (e *Entry) Sum() string {
	if e == nil {
		return "none"
	}
	b, _ := json.Marshal(e)
	return shortSum(string(b))[:8]
}

// Equal reports whether e and o record the same thing.
func (e *Entry) Equal(o *Entry) bool {
	if e == nil || o == nil {
		return e == nil && o == nil
	}
	return e.All == o.All && e.Digest == o.Digest && maps.Equal(e.Keys, o.Keys)
}

// summary returns the digest that stands in for e's keys: a hash of every
// key and its hash, sorted, each length-prefixed.
func (e *Entry) summary() string {
	if e.Digest != "" {
		return e.Digest
	}
	keys := slices.Sorted(maps.Keys(e.Keys))
	h := sha256.New()
	for _, k := range keys {
		writeField(h, k)
		writeField(h, e.Keys[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func writeField(h stdhash.Hash, s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	h.Write(n[:])
	h.Write([]byte(s))
}

// fit returns r, with its largest entries summarized until its encoding
// fits in RecordBudget. The choice depends only on r, so equal records fit
// alike.
func fit(r Record) Record {
	if len(r.String()) <= RecordBudget {
		return r
	}
	ids := slices.Collect(maps.Keys(r))
	slices.SortFunc(ids, func(a, b string) int {
		if d := len(r[b].keys()) - len(r[a].keys()); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	for _, id := range ids {
		e := r[id]
		if e == nil || e.Digest != "" {
			continue
		}
		r[id] = &Entry{All: e.All, Digest: e.summary()}
		if len(r.String()) <= RecordBudget {
			break
		}
	}
	return r
}

func (e *Entry) keys() map[string]string {
	if e == nil {
		return nil
	}
	return e.Keys
}

func shortSum(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:16]
}
