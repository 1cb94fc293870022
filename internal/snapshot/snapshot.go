// Package snapshot makes the immutable copies of ConfigMaps and Secrets
// that pinned workloads read (package pin), and hands each to the
// revisions that pin it, so that Kubernetes' garbage collector removes it
// with the last of them. watcher never deletes a snapshot.
//
// Making the snapshots of a restart (Maker.Make), per source the workload
// reads:
//
//	source                        what happens
//	gone                          not pinned: the pods read it live, as before
//	floats (pin.Floats)           not pinned, reported as floating
//	itself a snapshot (labelled   not pinned, floating ("a snapshot"): never
//	pin.SnapshotLabel, or named   a copy of a copy
//	<x>-pin-<20 hex> with
//	pin.SnapshotOf)
//	taken by its own snapshot     reused (same content, same name), and
//	                              owned by the workload too, whatever the
//	                              budget (reuse adds no byte)
//	snapshot name free, within    created, owned by the workload
//	the namespace's budget
//	over the namespace's budget   not pinned (Result.OverBudget)
//	taken by anything else        not touched; the source is not pinned
//	                              (Result.Taken), with a Warning
//	refused by the API server     not pinned (Result.Refused): a quota, an
//	(Forbidden, Invalid)          admission webhook or policy
//
// The budget (Maker.Budget) counts the bytes of the snapshots watcher
// made, never what an object says of itself: each snapshot carries its
// size (pin.Bytes) and the MAC of that size with the installation's key
// (pin.BytesSignature, Maker.Sign); Owners.Stored sums only the sizes
// whose MAC verifies (pin.SignedBytes), each at most pin.MaxBytes:
//
//	object labelled pin.SnapshotLabel            counted
//	made by watcher (size and MAC as written)    its size
//	size forged, huge, negative or malformed     0
//	MAC missing or made for another object       0
//	no signer (Sign nil: tests)                  its well-formed size
//
// Snapshots made for a restart that was then not written (a conflict, a
// paused rollout) are owned by their workload only: they count in the
// budget, and Owners hands them to the workload's current revision once
// they are older than Owners.Grace, so that they go with it (see Owners).
//
// A Secret's value passes through memory only while it is copied: it is
// read, copied into the create request, and dropped; it is never logged,
// kept or emitted.
package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/attribution"
	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/pin"
)

// Maker makes snapshots.
type Maker struct {
	// Client creates and patches snapshots; Fresh reads sources and
	// snapshots from the API server (never a cache: a cache of Secrets
	// would keep their values).
	Client client.Client
	Fresh  client.Reader
	// Hasher digests contents as the store does: a snapshot's name is its
	// source's name and the digest of its content.
	Hasher *hash.Hasher
	// Policy names the MutatingAdmissionPolicy and its binding that pin
	// pods at admission (Installed).
	Policy string
	// Budget is the most bytes of snapshots a namespace may hold (their
	// content, as pin.Bytes says it), Stored what it holds (Owners.Stored);
	// 0 or nil Stored: no budget.
	Budget int64
	Stored func(namespace string) int64
	// Sign signs the size of each snapshot made (pin.BytesSignature), so
	// that the budget counts only what watcher made: hash.Hasher.MAC in
	// production; nil: sizes unsigned.
	Sign pin.Signer
	// Now is the clock; nil: time.Now.
	Now func() time.Time

	mu        sync.Mutex
	checked   time.Time
	installed error
}

// recheck is how long Installed trusts its last answer.
const recheck = 10 * time.Second

// ErrOff wraps the answer of Installed when the admission policy or its
// binding is not there: pinning is off. Any other error of Installed is
// the API server's, to try again: it is never taken for off.
var ErrOff = errors.New("pinning is off")

// Installed returns nil when the admission policy and its binding are
// installed, an error wrapping ErrOff when one of them is not found (both
// answers trusted for 10 s), and any other error of the API server as it
// is, not trusted: the caller tries again.
func (m *Maker) Installed(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if !m.checked.IsZero() && now.Sub(m.checked) < recheck {
		return m.installed
	}
	var off error
	if err := m.Fresh.Get(ctx, types.NamespacedName{Name: m.Policy}, &admissionv1.MutatingAdmissionPolicy{}); apierrors.IsNotFound(err) {
		off = fmt.Errorf("%w: the MutatingAdmissionPolicy %s that pins pods is not there: restarting without pinning", ErrOff, m.Policy)
	} else if err != nil {
		return fmt.Errorf("get MutatingAdmissionPolicy %s: %w", m.Policy, err)
	} else if err := m.Fresh.Get(ctx, types.NamespacedName{Name: m.Policy}, &admissionv1.MutatingAdmissionPolicyBinding{}); apierrors.IsNotFound(err) {
		off = fmt.Errorf("%w: the MutatingAdmissionPolicyBinding %s that pins pods is not there: restarting without pinning", ErrOff, m.Policy)
	} else if err != nil {
		return fmt.Errorf("get MutatingAdmissionPolicyBinding %s: %w", m.Policy, err)
	}
	m.checked, m.installed = now, off
	return off
}

func (m *Maker) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// Result is what Make did for one restart.
type Result struct {
	// Pins are the sources pinned and their snapshots.
	Pins pin.Pins
	// Floating are the sources that stay live, and why.
	Floating map[pin.Source]string
	// Taken are the sources whose snapshot's name something else holds;
	// OverBudget those left live because the namespace's budget is spent;
	// Refused those whose snapshot the API server refused (a quota, an
	// admission webhook or policy).
	Taken, OverBudget, Refused []pin.Source
	// Made are the pinned sources whose snapshot was made now (the
	// others' existed: the same content was pinned before).
	Made []pin.Source
}

// Make makes (or reuses) the snapshot of each of sources, ConfigMaps and
// Secrets of owner's namespace, owned by owner (a workload, whose
// apiVersion and kind are ownerKind's). A transient error of the API
// server is returned, to try again; what the API server refuses for good
// leaves that source live.
func (m *Maker) Make(ctx context.Context, owner client.Object, ownerKind metav1.TypeMeta, sources []pin.Source) (Result, error) {
	ref := metav1.OwnerReference{APIVersion: ownerKind.APIVersion, Kind: ownerKind.Kind, Name: owner.GetName(), UID: owner.GetUID()}
	res := Result{Pins: pin.Pins{}, Floating: map[pin.Source]string{}}
	for _, src := range sources {
		name, why, err := m.one(ctx, owner.GetNamespace(), src, ref)
		if why == whyMade {
			res.Made, why = append(res.Made, src), ""
		}
		switch {
		case err != nil:
			return Result{}, err
		case why == whyGone:
			continue
		case why == whyTaken:
			res.Taken = append(res.Taken, src)
		case why == whyBudget:
			res.OverBudget = append(res.OverBudget, src)
		case why == whyRefused:
			res.Refused = append(res.Refused, src)
		case why != "":
			res.Floating[src] = why
		case name != "":
			res.Pins[src] = name
		}
	}
	return res, nil
}

// Why a source is not pinned, besides pin.Floats' reasons.
const (
	whyTaken    = "taken"
	whyBudget   = "budget"
	whyRefused  = "refused"
	whyGone     = "gone"
	whySnapshot = "a snapshot"
	whyMade     = "made" // not a why: made now
)

// isSnapshot reports whether obj, read as a source, is itself a snapshot
// (watcher's, or shaped as one): it is never copied.
func isSnapshot(obj client.Object) bool {
	if _, ok := obj.GetLabels()[pin.SnapshotLabel]; ok {
		return true
	}
	_, of := obj.GetAnnotations()[pin.SnapshotOf]
	return of && pin.LooksLikeSnapshot(obj.GetName(), "")
}

// one makes the snapshot of src; it returns its name, or why there is
// none.
func (m *Maker) one(ctx context.Context, ns string, src pin.Source, owner metav1.OwnerReference) (string, string, error) {
	live := newOf(src.Kind)
	if err := m.Fresh.Get(ctx, types.NamespacedName{Namespace: ns, Name: src.Name}, live); err != nil {
		if apierrors.IsNotFound(err) {
			return "", whyGone, nil
		}
		return "", "", fmt.Errorf("get %s %s/%s: %w", src.Kind, ns, src.Name, err)
	}
	if isSnapshot(live) {
		return "", whySnapshot, nil
	}
	if why := pin.Floats(src.Kind, secretType(live), live.GetAnnotations()); why != "" {
		return "", why, nil
	}
	d, err := m.Hasher.OfObject(live)
	if err != nil {
		return "", "", err
	}
	name := pin.SnapshotName(src.Name, d.Sum)
	snap := pin.Snapshot(live, name, owner)
	n := size(snap)
	snap.GetAnnotations()[pin.Bytes] = strconv.FormatInt(n, 10)
	if mac := pin.SignBytes(ns, name, n, m.Sign); mac != "" {
		snap.GetAnnotations()[pin.BytesSignature] = mac
	}
	if by := lastWriters(live); by != "" {
		snap.GetAnnotations()[pin.ChangedBy] = by
	}
	for range 2 { // a second time if it was collected meanwhile
		// An existing snapshot of this content is reused whatever the
		// budget: it adds no byte.
		taken, gone, err := m.reuse(ctx, ns, name, src, d.Sum, owner)
		switch {
		case err != nil:
			return "", "", err
		case taken:
			return "", whyTaken, nil
		case !gone:
			return name, "", nil
		}
		if !m.fits(ns, n) {
			return "", whyBudget, nil
		}
		err = m.Client.Create(ctx, snap)
		switch {
		case err == nil:
			return name, whyMade, nil
		case apierrors.IsAlreadyExists(err):
			continue // made meanwhile: reused, or taken
		case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
			return "", whyRefused, nil // a quota, an admission webhook or policy
		}
		return "", "", fmt.Errorf("create snapshot %s/%s: %w", ns, name, err)
	}
	return "", "", fmt.Errorf("snapshot %s/%s: made and collected again", ns, name)
}

// reuse checks that the object named name is src's snapshot of the
// content sum and adds owner to its owners. taken: it is something else;
// gone: it is not there (any more).
func (m *Maker) reuse(ctx context.Context, ns, name string, src pin.Source, sum string, owner metav1.OwnerReference) (taken, gone bool, err error) {
	held := newOf(src.Kind)
	if err := m.Fresh.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, held); err != nil {
		if apierrors.IsNotFound(err) {
			return false, true, nil
		}
		return false, false, fmt.Errorf("get snapshot %s/%s: %w", ns, name, err)
	}
	if !pin.IsSnapshot(held, src) || m.sumOf(held, ns, src) != sum {
		return true, false, nil
	}
	owners, changed := pin.Owned(held.GetOwnerReferences(), owner)
	if !changed {
		return false, false, nil
	}
	if err := PatchOwners(ctx, m.Client, held, owners); err != nil {
		if apierrors.IsNotFound(err) {
			return false, true, nil
		}
		return false, false, fmt.Errorf("own snapshot %s/%s: %w", ns, name, err)
	}
	return false, false, nil
}

// sumOf digests a snapshot's content as if it were its source's.
func (m *Maker) sumOf(snap client.Object, ns string, src pin.Source) string {
	data := map[string][]byte{}
	kind := "ConfigMap"
	switch o := snap.(type) {
	case *corev1.ConfigMap:
		for k, v := range o.Data {
			data[k] = []byte(v)
		}
		for k, v := range o.BinaryData {
			data[k] = v
		}
	case *corev1.Secret:
		kind, data = "Secret", o.Data
	}
	return m.Hasher.Of(hash.Source{Kind: kind, Namespace: ns, Name: src.Name}, data).Sum
}

// PatchOwners sets the owners of obj, on the condition that obj is still
// at the version read: the one change watcher makes to a snapshot (opts:
// a dry run's).
func PatchOwners(ctx context.Context, c client.Client, obj client.Object, owners []metav1.OwnerReference, opts ...client.PatchOption) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": obj.GetResourceVersion(), "ownerReferences": owners}})
	if err != nil {
		return err
	}
	return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch), opts...)
}

// fits reports whether a new snapshot of n bytes fits in ns's budget.
// What is made meanwhile, not yet seen by Stored, may go over it by the
// snapshots of the restarts in flight.
func (m *Maker) fits(ns string, n int64) bool {
	if m.Budget <= 0 || m.Stored == nil {
		return true
	}
	return m.Stored(ns)+n <= m.Budget
}

// size is the bytes of a snapshot's content.
func size(obj client.Object) int64 {
	var n int
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		for k, v := range o.Data {
			n += len(k) + len(v)
		}
		for k, v := range o.BinaryData {
			n += len(k) + len(v)
		}
	case *corev1.Secret:
		for k, v := range o.Data {
			n += len(k) + len(v)
		}
	}
	return int64(n)
}

// lastWriters names the field managers of obj's last write of its
// content, comma-separated ("" when unknown).
func lastWriters(obj client.Object) string {
	ws := attribution.FromManagedFields(obj.GetManagedFields())
	var out []string
	for _, w := range ws {
		if w.Time.Equal(ws[0].Time) {
			out = append(out, w.Manager)
		}
	}
	return strings.Join(out, ",")
}

// newOf returns an empty ConfigMap or Secret for kind.
func newOf(kind string) client.Object {
	if kind == pin.Secret {
		return &corev1.Secret{}
	}
	return &corev1.ConfigMap{}
}

// secretType is a Secret's type, "" for a ConfigMap.
func secretType(obj client.Object) string {
	if s, ok := obj.(*corev1.Secret); ok {
		return string(s.Type)
	}
	return ""
}
