package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
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
)

// Record is what a workload's pods were started with: for each ConfigMap or
// Secret they use, keyed "Kind/name", the hash of every key they read. A nil
// Entry means the object did not exist.
type Record map[string]Entry

// Entry maps key to hash for the keys a workload reads from one object.
type Entry map[string]string

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
	b, _ := json.Marshal(r) // a map of strings always marshals
	return string(b)
}

// RestartID is the value of RestartAnnotation for r: a short hash of its
// canonical encoding.
func (r Record) RestartID() string { return shortSum(r.String()) }

// Sum returns a short hash of e, for messages ("1a2b3c4d→5e6f7a8b").
func (e Entry) Sum() string {
	if e == nil {
		return "none"
	}
	b, _ := json.Marshal(e)
	return shortSum(string(b))[:8]
}

func shortSum(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:16]
}

// OptedOut reads the opt-out annotation from an object's annotations: the
// value "false" (or anything else strconv.ParseBool reads as false) opts the
// object out. A value that is not a boolean is reported and does not opt out,
// so that a typo never silently stops restarts. The error does not quote the
// value: on a Secret, it could be anything.
func OptedOut(annotations map[string]string, key string) (bool, error) {
	v, ok := annotations[key]
	if !ok {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("annotation %s is neither true nor false; treating it as true", key)
	}
	return !b, nil
}
