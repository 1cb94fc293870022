package cli

// watcher history: the revisions of a workload that pins its config
// (package pin), with, per pinned source, the snapshot it pins, the keys
// changed against the revision before and who changed them.
//
// Per revision and pinned source, what history says against the revision
// just older (the keys are compared in memory, snapshot against snapshot;
// only their names are printed):
//
//	this snapshot   older revision's snapshot of it   Status   Keys
//	gone            any                               gone     -
//	present         none (older unpinned, or none)    first    -
//	present         the same                          same     -
//	present         gone                              unknown  -
//	present         another, present                  changed  added, removed and changed keys

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/refs"
)

// fingerprints are the keys of a ConfigMap or Secret, each with an HMAC
// of its value under a key made at random for this process: enough to
// tell, in memory, whether a key changed; never printed, and worth
// nothing outside the process (no guess can be tested against it).
type fingerprints map[string]string

// fingerprintKey keys the fingerprints of this process.
var fingerprintKey = func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // crypto/rand.Read never fails (Go 1.24)
	return k
}()

// fingerprint reads the keys of a ConfigMap or Secret; the values are not
// kept.
func fingerprint(obj client.Object) fingerprints {
	out := fingerprints{}
	add := func(k string, v []byte) {
		m := hmac.New(sha256.New, fingerprintKey)
		_, _ = m.Write(v)
		out[k] = string(m.Sum(nil))
	}
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		for k, v := range o.Data {
			add(k, []byte(v))
		}
		for k, v := range o.BinaryData {
			add(k, v)
		}
	case *corev1.Secret:
		for k, v := range o.Data {
			add(k, v)
		}
	}
	return out
}

// changedKeys returns, sorted, the keys added, removed or changed from old
// to cur.
func changedKeys(old, cur fingerprints) []string { return hash.ChangedKeys(old, cur) }

// snap is what history knows of one snapshot.
type snap struct {
	// Gone: it is not there (collected, or never made).
	Gone      bool
	Created   time.Time
	ChangedBy []string
	Keys      fingerprints
}

// snapshots reads snapshots, once each.
type snapshots struct {
	r    *reader
	ns   string
	read map[string]snap
}

// get reads the snapshot name of src. A snapshot is read whole (a
// Secret's values too) and reduced at once to its fingerprints.
func (s *snapshots) get(ctx context.Context, src pin.Source, name string) (snap, error) {
	id := src.Kind + "/" + name
	if got, ok := s.read[id]; ok {
		return got, nil
	}
	obj := object(src.Kind)
	err := s.r.c.Get(ctx, types.NamespacedName{Namespace: s.ns, Name: name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		s.read[id] = snap{Gone: true}
		return s.read[id], nil
	case err != nil:
		return snap{}, fmt.Errorf("get snapshot %s %s/%s: %w", src.Kind, s.ns, name, err)
	}
	got := snap{Created: obj.GetCreationTimestamp().Time, Keys: fingerprint(obj)}
	if by := obj.GetAnnotations()[pin.ChangedBy]; by != "" {
		got.ChangedBy = strings.Split(by, ",")
	}
	s.read[id] = got
	return got, nil
}

// object returns an empty ConfigMap or Secret for a pin.Source kind.
func object(kind string) client.Object {
	if kind == pin.Secret {
		return &corev1.Secret{}
	}
	return &corev1.ConfigMap{}
}

// History is what watcher history says of a workload. Its JSON form is
// stable: fields may be added, never renamed or removed.
type History struct {
	Kind      string            `json:"kind"`
	Namespace string            `json:"namespace"`
	Name      string            `json:"name"`
	Revisions []RevisionHistory `json:"revisions"`
}

// RevisionHistory is one revision, newest first.
type RevisionHistory struct {
	Revision int64     `json:"revision"`
	Current  bool      `json:"current"`
	Object   string    `json:"object"`
	Created  time.Time `json:"created"`
	Images   []string  `json:"images"`
	// Pinned is false for a revision whose template pins nothing.
	Pinned  bool           `json:"pinned"`
	Sources []PinnedSource `json:"sources,omitempty"`
	// Floating are the sources its pod spec reads live ("configmap/name").
	Floating []string `json:"floating,omitempty"`
}

// PinnedSource is one pinned source of a revision.
type PinnedSource struct {
	Source   string `json:"source"`
	Snapshot string `json:"snapshot"`
	// Digest is the content digest in the snapshot's name.
	Digest string `json:"digest"`
	// Status is first, same, changed, gone or unknown (see the package's
	// table); Keys are the keys changed (names only).
	Status string   `json:"status"`
	Keys   []string `json:"keys,omitempty"`
	// ChangedBy wrote the content, at Since (when it was first pinned).
	ChangedBy []string   `json:"changedBy,omitempty"`
	Since     *time.Time `json:"since,omitempty"`
}

// The statuses of PinnedSource.
const (
	statusFirst   = "first"
	statusSame    = "same"
	statusChanged = "changed"
	statusGone    = "gone"
	statusUnknown = "unknown"
)

// digestOf returns the content digest in a snapshot's name.
func digestOf(name string) string {
	if i := strings.LastIndex(name, "-pin-"); i >= 0 {
		return name[i+len("-pin-"):]
	}
	return ""
}

// history builds the history of revs (newest first, the first current),
// with the snapshots read.
func history(revs []revision, snaps map[string]snap) []RevisionHistory {
	out := make([]RevisionHistory, 0, len(revs))
	for i, rev := range revs {
		h := RevisionHistory{Revision: rev.Number, Current: i == 0, Object: rev.Object, Created: rev.Created, Images: images(rev.Template.Spec)}
		pins := rev.pins()
		h.Pinned = len(pins) > 0
		var older pin.Pins
		if i+1 < len(revs) {
			older = revs[i+1].pins()
		}
		for _, src := range sortedSources(pins) {
			h.Sources = append(h.Sources, pinnedSource(src, pins[src], older[src], snaps))
		}
		if h.Pinned {
			h.Floating = floating(rev.Template.Spec, pins)
		}
		out = append(out, h)
	}
	return out
}

// pinnedSource compares the snapshot name of src with the older
// revision's snapshot of it, was ("" when none).
func pinnedSource(src pin.Source, name, was string, snaps map[string]snap) PinnedSource {
	p := PinnedSource{Source: src.String(), Snapshot: name, Digest: digestOf(name)}
	cur := snaps[src.Kind+"/"+name]
	if cur.Gone {
		p.Status = statusGone
		return p
	}
	p.ChangedBy = cur.ChangedBy
	if !cur.Created.IsZero() {
		t := cur.Created.UTC()
		p.Since = &t
	}
	old, known := snaps[src.Kind+"/"+was]
	switch {
	case was == "":
		p.Status = statusFirst
	case was == name:
		p.Status = statusSame
	case !known || old.Gone:
		p.Status = statusUnknown
	default:
		p.Status, p.Keys = statusChanged, changedKeys(old.Keys, cur.Keys)
	}
	return p
}

// sortedSources returns the sources of pins, sorted.
func sortedSources(pins pin.Pins) []pin.Source {
	out := make([]pin.Source, 0, len(pins))
	for s := range pins {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b pin.Source) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// floating returns, sorted, the ConfigMaps and Secrets spec reads that
// pins does not pin.
func floating(spec corev1.PodSpec, pins pin.Pins) []string {
	var out []string
	for _, p := range refs.Paths(&spec) {
		src, ok := sourceOf(p.Kind, p.Name)
		if !ok {
			continue
		}
		if _, pinned := pins[src]; !pinned {
			out = append(out, src.String())
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// sourceOf returns the pin.Source of a reference; false for a kind that is
// not pinned (SecretProviderClass).
func sourceOf(kind refs.Kind, name string) (pin.Source, bool) {
	switch kind {
	case refs.ConfigMap:
		return pin.Source{Kind: pin.ConfigMap, Name: name}, true
	case refs.Secret:
		return pin.Source{Kind: pin.Secret, Name: name}, true
	}
	return pin.Source{}, false
}

// images returns the images of spec's init containers and containers.
func images(spec corev1.PodSpec) []string {
	out := []string{}
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		out = append(out, c.Image)
	}
	return out
}

// readHistory reads the workload named by arg and its revisions.
func (r *reader) readHistory(ctx context.Context, arg string) (History, error) {
	kind, obj, err := r.pinnable(ctx, arg)
	if err != nil {
		return History{}, err
	}
	revs, err := r.revisions(ctx, kind, obj)
	if err != nil {
		return History{}, err
	}
	snaps := &snapshots{r: r, ns: obj.GetNamespace(), read: map[string]snap{}}
	for _, rev := range revs {
		for src, name := range rev.pins() {
			if _, err := snaps.get(ctx, src, name); err != nil {
				return History{}, err
			}
		}
	}
	return History{Kind: kind.Name(), Namespace: obj.GetNamespace(), Name: obj.GetName(), Revisions: history(revs, snaps.read)}, nil
}

// WriteText writes h for people.
func (h History) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "%s %s/%s\n", h.Kind, h.Namespace, h.Name)
	if len(h.Revisions) == 0 {
		fmt.Fprintln(w, "No revisions.")
	}
	for _, rev := range h.Revisions {
		current := ""
		if rev.Current {
			current = " (current)"
		}
		fmt.Fprintf(w, "\nREVISION %d%s  %s  %s\n", rev.Revision, current, rev.Created.UTC().Format(time.RFC3339), rev.Object)
		fmt.Fprintf(w, "  images: %s\n", strings.Join(rev.Images, ", "))
		if !rev.Pinned {
			fmt.Fprintln(w, "  unpinned")
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, s := range rev.Sources {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", s.Source, s.Digest, sourceText(s))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if len(rev.Floating) > 0 {
			fmt.Fprintf(w, "  floating: %s\n", strings.Join(rev.Floating, ", "))
		}
	}
	return nil
}

// sourceText says what changed in a pinned source.
func sourceText(s PinnedSource) string {
	var out string
	switch s.Status {
	case statusGone:
		return "snapshot " + s.Snapshot + " gone"
	case statusFirst:
		out = "first pinned"
	case statusSame:
		out = "unchanged"
	case statusUnknown:
		out = "changed (the older snapshot is gone: keys unknown)"
	default:
		out = "keys changed: " + strings.Join(s.Keys, ", ")
		if len(s.Keys) == 0 {
			out = "no key changed"
		}
	}
	if s.Status != statusSame {
		if len(s.ChangedBy) > 0 {
			out += "; by " + strings.Join(s.ChangedBy, ", ")
		}
		if s.Since != nil {
			out += "; pinned since " + s.Since.Format(time.RFC3339)
		}
	}
	return out
}
