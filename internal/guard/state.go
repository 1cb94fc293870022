package guard

import (
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/watcher-dev/watcher/internal/object"
)

// StateAnnotation, on a workload's metadata, is what the guards keep of
// the restarts watcher wrote to it, so that it survives a restart of
// watcher and a lease handover: written with every restart, in the same
// patch, and read back from the cluster (level-triggered) by whichever
// replica decides the workload next.
//
//	field   what                                          used by
//	at      when the restart was written (Unix seconds)   the rollout's timeout
//	gen     the workload's generation the write made      "a rollout watcher started"
//	times   the restarts within the budget's window       Budget
//	for     the change restarted: sources and their sums  FailedGate
//	mac     HMAC of the above, the workload's UID and     all: a state watcher did
//	        the installation's hash key                   not write counts as none
//
// A tenant can copy or edit the annotation, but not forge one: a copy on
// another workload (another UID), or an edit, fails the MAC and is ignored
// (the workload then has no history, as one never restarted).
const StateAnnotation = "watcher.dev/restart-state"

// State is what StateAnnotation holds.
type State struct {
	// At is when the restart was written.
	At time.Time
	// Generation is the workload's generation after the restart's write.
	Generation int64
	// Times are the restarts within the budget's window, oldest first,
	// At included.
	Times []time.Time
	// Sources are the change the restart was for.
	Sources []Source
	// Evict is true when the restart was made by eviction: its rollout
	// shows in its pods, not in the workload's status.
	Evict bool
}

// Bounds of a State, so that the annotation stays small whatever the
// budget and however many sources one restart has.
const (
	// MaxStateTimes is the most restart times kept (the budget's Max
	// beyond it is counted in memory only).
	MaxStateTimes = 32
	// MaxStateSources is the most sources of a change kept; a restart for
	// more is held on a failure of its first MaxStateSources only.
	MaxStateSources = 16
	// sumLen is the length kept of each source's sum: a keyed digest, so
	// its prefix tells contents apart and reveals nothing.
	sumLen = 16
)

// byEvict is wireState.By of a restart by eviction.
const byEvict = "evict"

// Signer computes the MAC of a State: an HMAC with the installation's key.
type Signer func(data []byte) string

type wireState struct {
	At    int64    `json:"at"`
	Gen   int64    `json:"gen"`
	Times []int64  `json:"times,omitempty"`
	For   []string `json:"for,omitempty"`
	// By is "evict" for a restart by eviction; absent otherwise, so
	// that the states written before it sign alike.
	By  string `json:"by,omitempty"`
	MAC string `json:"mac"`
}

// Encode returns the annotation's value for s on the workload of uid,
// signed with sign.
func (s State) Encode(uid string, sign Signer) string {
	w := wireState{At: s.At.Unix(), Gen: s.Generation}
	if s.Evict {
		w.By = byEvict
	}
	times := s.Times
	if len(times) > MaxStateTimes {
		times = times[len(times)-MaxStateTimes:]
	}
	for _, t := range times {
		w.Times = append(w.Times, t.Unix())
	}
	w.For = encodeSources(s.Sources)
	w.MAC = sign(w.payload(uid))
	b, _ := json.Marshal(w) // numbers and strings always marshal
	return string(b)
}

// ErrForged is the error of a state whose MAC does not match: written by
// someone other than watcher, copied from another workload, or signed with
// another installation's key.
var ErrForged = errors.New("restart state not written by this installation for this workload: ignored")

// maxStateLen bounds the annotation read: a longer one is not watcher's.
const maxStateLen = 4096

// DecodeState reads the annotation's value on the workload of uid. Any
// error means that the workload has no state to trust.
func DecodeState(v, uid string, sign Signer) (State, error) {
	if len(v) > maxStateLen {
		return State{}, fmt.Errorf("%s: %d bytes: %w", StateAnnotation, len(v), ErrForged)
	}
	var w wireState
	if err := json.Unmarshal([]byte(v), &w); err != nil {
		return State{}, fmt.Errorf("parse %s: %w", StateAnnotation, err)
	}
	if len(w.Times) > MaxStateTimes || len(w.For) > MaxStateSources ||
		!hmac.Equal([]byte(sign(w.payload(uid))), []byte(w.MAC)) {
		return State{}, ErrForged
	}
	s := State{At: time.Unix(w.At, 0).UTC(), Generation: w.Gen, Evict: w.By == byEvict}
	for _, t := range w.Times {
		s.Times = append(s.Times, time.Unix(t, 0).UTC())
	}
	for _, f := range w.For {
		src, ok := decodeSource(f)
		if !ok {
			return State{}, fmt.Errorf("parse %s: source %.40q", StateAnnotation, f)
		}
		s.Sources = append(s.Sources, src)
	}
	return s, nil
}

// payload is what the MAC covers: every field, and the workload's UID.
func (w wireState) payload(uid string) []byte {
	c := w
	c.MAC = ""
	b, _ := json.Marshal(c)
	return slices.Concat([]byte("watcher restart state v1\x00"), []byte(uid), []byte{0}, b)
}

// encodeSources writes the first MaxStateSources of sources (encodeSource).
func encodeSources(sources []Source) []string {
	var out []string
	for _, src := range sources[:min(len(sources), MaxStateSources)] {
		out = append(out, encodeSource(src))
	}
	return out
}

// encodeSource writes "Kind/namespace/name=sum".
func encodeSource(s Source) string {
	sum := s.Sum
	if len(sum) > sumLen {
		sum = sum[:sumLen]
	}
	return s.Object.Kind + "/" + s.Object.Namespace + "/" + s.Object.Name + "=" + sum
}

func decodeSource(s string) (Source, bool) {
	ref, sum, ok := strings.Cut(s, "=")
	parts := strings.SplitN(ref, "/", 3)
	if !ok || len(parts) != 3 {
		return Source{}, false
	}
	return Source{Object: object.Ref{Kind: parts[0], Namespace: parts[1], Name: parts[2]}, Sum: sum}, true
}

// sameChange reports whether two sources are the same change: the same
// object and content. A sum read back from a State is a prefix.
func sameChange(a, b Source) bool {
	if a.Object != b.Object {
		return false
	}
	n := min(len(a.Sum), len(b.Sum), sumLen)
	return n > 0 && a.Sum[:n] == b.Sum[:n] && (len(a.Sum) == len(b.Sum) || n == sumLen)
}
