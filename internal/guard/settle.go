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

// Settles holds the restart of a workload until its whole change has
// landed: until none of its changed sources has changed for the
// workload's quiet period (Settle.Quiet), and no longer than its maximum
// (Settle.Max) from the first change of the set (Settle.Opened). The
// sources of one workload written apart (a username, then its password;
// a ConfigMap, then a Secret) then roll out once, together. Reloader's
// pause period is a settle too: quiet and maximum the period, counted from
// the first change (Settle.Pause). It keeps nothing: when the set opened
// and last changed are told by the caller, from the set kept on the
// workload (PendingAnnotation) and the changes it saw, so that a restart
// of watcher or a lease handover resumes the same wait.
//
//	settle                                 verdict
//	no quiet period and no maximum         admit
//	last change unknown, or Quiet ago      admit
//	Max since the set opened               admit (however busy its sources)
//	otherwise                              hold until the earlier of the two
type Settles struct{}

// Settle is what Settles is told of a restart's change set.
type Settle struct {
	// Quiet is how long the changed sources must have been quiet; Max
	// bounds the wait from Opened; zero: none.
	Quiet, Max time.Duration
	// Opened is when the set opened: its first change seen; Last when
	// one of its sources last changed (zero: not known, taken as quiet).
	Opened, Last time.Time
	// Pause is true when the settle is Reloader's pause period.
	Pause bool
	// Refreshed is true once the workload's other ExternalSecrets were
	// asked to sync for this set (Pending.Refreshed).
	Refreshed bool
	// Release is the newest change-set id of the changed sources
	// (optin.ChangeSet), and Lagging the sources of the workload that
	// carry another: the set is not whole until they catch up, or Max.
	Release string
	Lagging []Lag
}

// Lag is a source whose change-set id is not the newest.
type Lag struct {
	Source object.Ref
	ID     string
}

// Due returns when the restart of s may be written: zero when at once.
func (s Settle) Due() time.Time {
	if (s.Quiet <= 0 && s.Max <= 0) || s.Last.IsZero() {
		return time.Time{}
	}
	due := s.Last.Add(s.Quiet)
	if s.Max > 0 && !s.Opened.IsZero() {
		if end := s.Opened.Add(s.Max); end.Before(due) {
			due = end
		}
	}
	return due
}

// Check implements Gate.
func (Settles) Check(r Request) Verdict {
	if s := r.Settle; len(s.Lagging) > 0 && s.Max > 0 && r.Now.Before(s.Opened.Add(s.Max)) {
		l := s.Lagging[0]
		msg := fmt.Sprintf("waiting for the whole change set %q: %s %s has %q", s.Release, l.Source.Kind, l.Source.Name, l.ID)
		if n := len(s.Lagging); n > 1 {
			msg += fmt.Sprintf(" (and %d more)", n-1)
		}
		return Verdict{Hold: true, Reason: ReasonChangeSet, Until: s.Opened.Add(s.Max), Message: msg + "; rolling out at the latest at " + s.Opened.Add(s.Max).UTC().Format(time.RFC3339)}
	}
	due := r.Settle.Due()
	if due.IsZero() || !r.Now.Before(due) {
		return Verdict{}
	}
	if r.Settle.Pause {
		return Verdict{Hold: true, Reason: ReasonPausePeriod, Until: due,
			Message: fmt.Sprintf("pause period %s: the changes until %s roll out together",
				short(r.Settle.Max), due.UTC().Format(time.RFC3339))}
	}
	return Verdict{Hold: true, Reason: ReasonChangeSet, Until: due,
		Message: fmt.Sprintf("waiting for the whole change: its sources quiet for %s (at most %s from the first change); %d changed so far, rolling out together at %s",
			short(r.Settle.Quiet), short(r.Settle.Max), len(r.Sources), due.UTC().Format(time.RFC3339))}
}

// PendingAnnotation, on a workload's metadata, is the change set its
// restart waits for (Settles): written when the wait begins or the set
// grows, removed by the restart's patch, signed like StateAnnotation.
//
//	field   what
//	opened  when the set opened (Unix seconds)
//	last    when a source of it last changed
//	for     its sources and their sums
//	keys    the keys of each that changed (names only)
//	ref     the workload's other ExternalSecrets were asked to sync
//	mac     HMAC of the above, the workload's UID and the hash key
const PendingAnnotation = "watcher.dev/pending-change"

// Pending is what PendingAnnotation holds.
type Pending struct {
	Opened, Last time.Time
	Sources      []Source
	// Refreshed: the workload's other ExternalSecrets were asked to sync
	// for this set, once.
	Refreshed bool
}

type wirePending struct {
	Opened int64    `json:"opened"`
	Last   int64    `json:"last"`
	For    []string `json:"for,omitempty"`
	Keys   []string `json:"keys,omitempty"`
	Ref    bool     `json:"ref,omitempty"`
	MAC    string   `json:"mac"`
}

// Encode returns the annotation's value for p on the workload of uid,
// signed with sign; its sources are cut to MaxStateSources.
func (p Pending) Encode(uid string, sign Signer) string {
	w := wirePending{Opened: p.Opened.Unix(), Last: p.Last.Unix(), Ref: p.Refreshed}
	w.For = encodeSources(p.Sources)
	for _, src := range p.Sources[:len(w.For)] {
		w.Keys = append(w.Keys, keyList(src.Keys))
	}
	if !slices.ContainsFunc(w.Keys, func(k string) bool { return k != "" }) {
		w.Keys = nil
	}
	w.MAC = sign(w.payload(uid))
	b, _ := json.Marshal(w) // numbers and strings always marshal
	return string(b)
}

// DecodePending reads the annotation's value on the workload of uid. Any
// error means that the workload has no pending set to trust.
func DecodePending(v, uid string, sign Signer) (Pending, error) {
	if len(v) > maxStateLen {
		return Pending{}, fmt.Errorf("%s: %d bytes: %w", PendingAnnotation, len(v), ErrForged)
	}
	var w wirePending
	if err := json.Unmarshal([]byte(v), &w); err != nil {
		return Pending{}, fmt.Errorf("parse %s: %w", PendingAnnotation, err)
	}
	if len(w.For) > MaxStateSources || len(w.Keys) > len(w.For) || !hmac.Equal([]byte(sign(w.payload(uid))), []byte(w.MAC)) {
		return Pending{}, ErrPendingForged
	}
	p := Pending{Opened: time.Unix(w.Opened, 0).UTC(), Last: time.Unix(w.Last, 0).UTC(), Refreshed: w.Ref}
	for i, f := range w.For {
		src, ok := decodeSource(f)
		if !ok {
			return Pending{}, fmt.Errorf("parse %s: source %.40q", PendingAnnotation, f)
		}
		if i < len(w.Keys) && w.Keys[i] != "" {
			src.Keys = strings.Split(w.Keys[i], ",")
		}
		p.Sources = append(p.Sources, src)
	}
	return p, nil
}

// maxPendingKeys bounds the keys kept per source of a pending set; the
// rest are counted ("+3").
const maxPendingKeys = 8

// keyList joins the first maxPendingKeys of keys (names only), cut.
func keyList(keys []string) string {
	if len(keys) > maxPendingKeys {
		keys = append(slices.Clone(keys[:maxPendingKeys]), fmt.Sprintf("+%d", len(keys)-maxPendingKeys))
	}
	out := strings.Join(keys, ",")
	if len(out) > 256 {
		out = out[:256]
	}
	return out
}

// ReadPending reads the annotation's value without checking its MAC, for
// display only (watcher explain, which may not hold the hash key): what it
// says may be forged.
func ReadPending(v string) (Pending, error) {
	if len(v) > maxStateLen {
		return Pending{}, fmt.Errorf("%s: %d bytes", PendingAnnotation, len(v))
	}
	var w wirePending
	if err := json.Unmarshal([]byte(v), &w); err != nil {
		return Pending{}, fmt.Errorf("parse %s: %w", PendingAnnotation, err)
	}
	p := Pending{Opened: time.Unix(w.Opened, 0).UTC(), Last: time.Unix(w.Last, 0).UTC(), Refreshed: w.Ref}
	for i, f := range w.For {
		if i == MaxStateSources {
			break
		}
		if src, ok := decodeSource(f); ok {
			if i < len(w.Keys) && w.Keys[i] != "" {
				src.Keys = strings.Split(w.Keys[i], ",")
			}
			p.Sources = append(p.Sources, src)
		}
	}
	return p, nil
}

// ErrPendingForged is the error of a pending set whose MAC does not match.
var ErrPendingForged = errors.New("pending change not written by this installation for this workload: ignored")

func (w wirePending) payload(uid string) []byte {
	c := w
	c.MAC = ""
	b, _ := json.Marshal(c)
	return slices.Concat([]byte("watcher pending change v1\x00"), []byte(uid), []byte{0}, b)
}

// Holds reports whether p holds exactly the change of sources: the same
// objects, each with the same content (as far as MaxStateSources kept).
func (p Pending) Holds(sources []Source) bool {
	n := min(len(sources), MaxStateSources)
	if len(p.Sources) != n {
		return false
	}
	for i := range n {
		if !sameChange(p.Sources[i], sources[i]) {
			return false
		}
	}
	return true
}

// Equal reports whether p and q keep the same thing once encoded.
func (p Pending) Equal(q Pending) bool {
	return p.Opened.Unix() == q.Opened.Unix() && p.Last.Unix() == q.Last.Unix() && p.Refreshed == q.Refreshed && p.Holds(q.Sources)
}
