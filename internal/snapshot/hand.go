package snapshot

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/pin"
)

// pinned is a revision as the hand-over reads it.
type pinned struct {
	meta metav1.ObjectMeta
	// kind is "ReplicaSet" or "ControllerRevision".
	kind     string
	template corev1.PodTemplateSpec
}

// ref is the owner reference of the revision.
func (p *pinned) ref() metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: p.kind, Name: p.meta.Name, UID: p.meta.UID}
}

// hand makes the revision r an owner of each snapshot it pins, in place of
// its workload once r is the workload's current revision (see Owners). It
// returns r's UID once done ("" when r is gone).
func (o *Owners) hand(ctx context.Context, r revision) (types.UID, error) {
	switch r.resource {
	case "pods":
		return "", o.unpinned(ctx, r)
	case "configmaps", "secrets":
		return "", o.handBack(ctx, r)
	}
	rev, err := o.readRevision(ctx, r.resource, r.namespace, r.name)
	if err != nil || rev == nil {
		return "", err
	}
	owner := metav1.GetControllerOf(&rev.meta)
	if owner == nil {
		return rev.meta.UID, nil
	}
	pins, err := o.handTo(ctx, rev, *owner)
	if err != nil {
		return "", err
	}
	if wait := o.left(rev.meta.CreationTimestamp); len(pins) > 0 && wait > 0 && o.q != nil {
		// Handed again once settled: then its workload may let go.
		o.q.AddAfter(revision{resource: r.resource, namespace: r.namespace, name: r.name}, wait)
	}
	if sel := podsOf(rev.kind, rev.meta); len(pins) > 0 && sel != "" && o.q != nil {
		o.q.AddAfter(revision{resource: "pods", namespace: r.namespace, name: rev.meta.Name, pods: sel, workload: *owner}, cmp.Or(o.CheckAfter, 10*time.Second))
	}
	return rev.meta.UID, nil
}

// readRevision reads the revision ns/name of resource (replicasets or
// controllerrevisions) from the API server; nil when it is gone. A
// ControllerRevision that holds no template has none.
func (o *Owners) readRevision(ctx context.Context, resource, ns, name string) (*pinned, error) {
	key := types.NamespacedName{Namespace: ns, Name: name}
	if resource == "replicasets" {
		var rs appsv1.ReplicaSet
		if err := o.Fresh.Get(ctx, key, &rs); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
		return &pinned{meta: rs.ObjectMeta, kind: "ReplicaSet", template: rs.Spec.Template}, nil
	}
	var cr appsv1.ControllerRevision
	if err := o.Fresh.Get(ctx, key, &cr); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	var data struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(cr.Data.Raw, &data); err != nil {
		data.Spec.Template = corev1.PodTemplateSpec{} // not a template revision: nothing to hand
	}
	return &pinned{meta: cr.ObjectMeta, kind: "ControllerRevision", template: data.Spec.Template}, nil
}

// pinsOf returns the pins of a revision's template annotations ann, of
// namespace ns, that watcher wrote: none when there are more than
// pin.MaxPins entries or (Sign set) their signature does not verify; only
// the entries named as their source's snapshot.
func (o *Owners) pinsOf(ns string, ann map[string]string) pin.Pins {
	s := ann[pin.PinsAnnotation]
	if s == "" || strings.Count(s, ",") >= pin.MaxPins {
		return nil
	}
	if o.Sign != nil && !pin.Signed(ns, s, ann[pin.SignatureAnnotation], o.Sign) {
		return nil
	}
	p := pin.Parse(s)
	maps.DeleteFunc(p, func(src pin.Source, name string) bool { return !pin.LooksLikeSnapshot(name, src.Name) })
	return p
}

// handTo makes rev (whose controller is w) an owner of each snapshot it
// pins; w loses its ownership of them only if rev is w's current
// revision and older than Grace (a restart made meanwhile, whose template
// is not written yet, may have reused them), and that revision then also
// takes the snapshots w owns alone for longer than Grace. It returns the
// pins handed.
func (o *Owners) handTo(ctx context.Context, rev *pinned, w metav1.OwnerReference) (pin.Pins, error) {
	ns := rev.meta.Namespace
	pins := o.pinsOf(ns, rev.template.Annotations)
	if len(pins) == 0 {
		return nil, nil
	}
	cur := o.currentOnce(ctx, rev, w)
	settled := o.left(rev.meta.CreationTimestamp) <= 0
	for src, name := range pins {
		snap, err := o.snapshotOf(ctx, ns, src, name)
		if err != nil {
			return nil, err
		}
		if snap == nil {
			continue
		}
		owners, changed := pin.Owned(snap.OwnerReferences, rev.ref())
		if owns(owners, w.UID) && settled {
			current, now, err := cur()
			if err != nil {
				return nil, err
			}
			// w lets go once its current revision owns the snapshot, or
			// once its current template (read) no longer pins it: an
			// older revision's content reused by a restart since
			// superseded, which then goes with the revisions alone.
			if current || (now != nil && !pinsName(now, name)) {
				owners, changed = without(owners, w.UID), true
			}
		}
		if !changed {
			continue
		}
		if err := PatchOwners(ctx, o.Client, snap, owners); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("hand snapshot %s/%s to %s %s: %w", ns, name, rev.kind, rev.meta.Name, err)
		}
	}
	return pins, o.collect(ctx, rev, w, pins, func() (bool, error) { c, _, err := cur(); return c, err })
}

// collect makes rev, once it is w's current revision, the owner of each
// snapshot that w owns alone for longer than Grace and rev does not pin
// (made for a restart that was not written): it goes with rev.
func (o *Owners) collect(ctx context.Context, rev *pinned, w metav1.OwnerReference, pins pin.Pins, current func() (bool, error)) error {
	pinned := map[string]bool{}
	for src, name := range pins {
		pinned[src.Kind+"/"+name] = true
	}
	for _, kind := range []string{pin.ConfigMap, pin.Secret} {
		for _, snap := range o.ownedBy(kind, rev.meta.Namespace, w.UID) {
			if a := alone(snap.OwnerReferences); a == nil || a.UID != w.UID || pinned[kind+"/"+snap.Name] || o.left(snap.CreationTimestamp) > 0 {
				continue
			}
			if ok, err := current(); err != nil || !ok {
				return err
			}
			snap.SetGroupVersionKind(gvkOf(kind))
			if err := PatchOwners(ctx, o.Client, snap, []metav1.OwnerReference{rev.ref()}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("hand snapshot %s/%s to %s %s: %w", snap.Namespace, snap.Name, rev.kind, rev.meta.Name, err)
			}
		}
	}
	return nil
}

// ownedBy returns the snapshots of kind in ns that the watch holds and uid
// owns.
func (o *Owners) ownedBy(kind, ns string, uid types.UID) []*metav1.PartialObjectMetadata {
	o.mu.Lock()
	stores := o.snapshots[kind]
	o.mu.Unlock()
	var out []*metav1.PartialObjectMetadata
	for _, st := range stores {
		objs, _ := st.store.ByIndex(byOwner, string(uid))
		for _, obj := range objs {
			if m := obj.(*metav1.PartialObjectMetadata); m.Namespace == ns {
				out = append(out, m.DeepCopy())
			}
		}
	}
	return out
}

// currentOnce returns whether rev is w's current revision (Owners.current),
// and the pins of w's current template, asked at most once.
func (o *Owners) currentOnce(ctx context.Context, rev *pinned, w metav1.OwnerReference) func() (bool, pin.Pins, error) {
	var asked, current bool
	var pins pin.Pins
	return func() (bool, pin.Pins, error) {
		if asked {
			return current, pins, nil
		}
		ok, p, err := o.current(ctx, rev, w)
		if err != nil {
			return false, nil, err
		}
		asked, current, pins = true, ok, p
		return ok, p, nil
	}
}

// current reports whether rev was made from the current template of its
// workload w, read from the API server, and the pins of that template:
// false and nil when w is gone, not readable, or in doubt (then w keeps
// its snapshots).
func (o *Owners) current(ctx context.Context, rev *pinned, w metav1.OwnerReference) (bool, pin.Pins, error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(w.APIVersion)
	u.SetKind(w.Kind)
	if err := o.Fresh.Get(ctx, types.NamespacedName{Namespace: rev.meta.Namespace, Name: w.Name}, u); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || meta.IsNoMatchError(err) {
			return false, nil, nil
		}
		return false, nil, fmt.Errorf("get %s %s/%s: %w", w.Kind, rev.meta.Namespace, w.Name, err)
	}
	raw, ok, err := unstructured.NestedMap(u.Object, "spec", "template")
	if u.GetUID() != w.UID || !ok || err != nil {
		return false, nil, nil
	}
	var tmpl corev1.PodTemplateSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &tmpl); err != nil {
		return false, nil, nil
	}
	pins := pin.Parse(tmpl.Annotations[pin.PinsAnnotation])
	if pins == nil {
		pins = pin.Pins{} // read: pins nothing
	}
	return sameTemplate(tmpl, rev.template, w.APIVersion == "apps/v1"), pins, nil
}

// hashLabels are the labels a revision adds to its workload's template.
var hashLabels = []string{appsv1.DefaultDeploymentUniqueLabelKey, rolloutsHashLabel}

// sameTemplate reports whether the revision's template rev was made from
// the workload's template w: the same labels (hash labels aside) and
// annotations and, when spec (the API server defaults both alike, as for
// apps/v1 kinds), the same spec.
func sameTemplate(w, rev corev1.PodTemplateSpec, spec bool) bool {
	wl, rl := maps.Clone(w.Labels), maps.Clone(rev.Labels)
	for _, k := range hashLabels {
		delete(wl, k)
		delete(rl, k)
	}
	if !maps.Equal(wl, rl) || !maps.Equal(w.Annotations, rev.Annotations) {
		return false
	}
	return !spec || equality.Semantic.DeepEqual(w.Spec, rev.Spec)
}

// pinsName reports whether pins name the snapshot name.
func pinsName(pins pin.Pins, name string) bool {
	for _, n := range pins {
		if n == name {
			return true
		}
	}
	return false
}

// snapshotOf returns the snapshot ns/name of src from the snapshots'
// watch, else (just made) from the API server; nil when it is not there or
// is not watcher's snapshot of src.
func (o *Owners) snapshotOf(ctx context.Context, ns string, src pin.Source, name string) (*metav1.PartialObjectMetadata, error) {
	snap, ok := o.cachedSnapshot(src.Kind, ns, name)
	if !ok {
		snap = &metav1.PartialObjectMetadata{}
		snap.SetGroupVersionKind(gvkOf(src.Kind))
		if err := o.Fresh.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, snap); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, nil
			}
			return nil, fmt.Errorf("get snapshot %s/%s: %w", ns, name, err)
		}
	}
	snap.SetGroupVersionKind(gvkOf(src.Kind))
	if snap.Labels[pin.SnapshotLabel] != "true" || snap.Annotations[pin.SnapshotOf] != src.String() {
		return nil, nil // not a snapshot of watcher's: never touched
	}
	return snap, nil
}

// handBack looks again at the snapshot r: one that a workload owns besides
// one of its revisions is handed to that revision again (the workload
// loses it if the revision is its current one); one that its workload
// owns alone, once older than Grace, is offered to each of the
// workload's pinned revisions (the current one takes it).
func (o *Owners) handBack(ctx context.Context, r revision) error {
	snap := &metav1.PartialObjectMetadata{}
	snap.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: map[string]string{"configmaps": "ConfigMap", "secrets": "Secret"}[r.resource]})
	if err := o.Fresh.Get(ctx, types.NamespacedName{Namespace: r.namespace, Name: r.name}, snap); err != nil {
		return client.IgnoreNotFound(err)
	}
	if snap.Labels[pin.SnapshotLabel] != "true" {
		return nil
	}
	if w := alone(snap.OwnerReferences); w != nil {
		if wait := o.left(snap.CreationTimestamp); wait > 0 {
			if o.q != nil {
				o.q.AddAfter(r, wait)
			}
			return nil
		}
		for _, rv := range o.revisionsOf(w.UID) {
			if o.q != nil {
				o.q.Add(rv)
			}
		}
		return nil
	}
	for _, ref := range snap.OwnerReferences {
		resource := revisionResources[ref.Kind]
		w := o.controllerOf(ref.UID)
		if resource == "" || w == nil || !owns(snap.OwnerReferences, w.UID) {
			continue
		}
		rev, err := o.readRevision(ctx, resource, r.namespace, ref.Name)
		if err != nil {
			return err
		}
		if rev == nil || rev.meta.UID != ref.UID {
			continue
		}
		if _, err := o.handTo(ctx, rev, *w); err != nil {
			return fmt.Errorf("hand snapshot %s/%s back to its revisions: %w", r.namespace, r.name, err)
		}
	}
	return nil
}

// revisionResources are the resources of the revisions, by kind.
var revisionResources = map[string]string{"ReplicaSet": "replicasets", "ControllerRevision": "controllerrevisions"}

// controllerOf returns the controller of the revision uid, as the
// revisions' watch holds it.
func (o *Owners) controllerOf(uid types.UID) *metav1.OwnerReference {
	for _, rw := range o.revisions {
		objs, _ := rw.inf.GetIndexer().ByIndex(byUID, string(uid))
		for _, obj := range objs {
			if c := metav1.GetControllerOf(obj.(*metav1.PartialObjectMetadata)); c != nil {
				return c
			}
		}
	}
	return nil
}

// revisionsOf returns the revisions that the watch holds of the workload
// uid.
func (o *Owners) revisionsOf(uid types.UID) []revision {
	var out []revision
	for _, rw := range o.revisions {
		objs, _ := rw.inf.GetIndexer().ByIndex(byController, string(uid))
		for _, obj := range objs {
			m := obj.(*metav1.PartialObjectMetadata)
			out = append(out, revision{resource: rw.resource, namespace: m.Namespace, name: m.Name})
		}
	}
	return out
}

// alone returns the one owner of a snapshot owned by one workload alone
// (no revision); nil otherwise.
func alone(owners []metav1.OwnerReference) *metav1.OwnerReference {
	if len(owners) != 1 || revisionResources[owners[0].Kind] != "" {
		return nil
	}
	return &owners[0]
}

// left returns how long what was made at made has to wait until it is
// settled (Grace after).
func (o *Owners) left(made metav1.Time) time.Duration {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	return made.Add(cmp.Or(o.Grace, 10*time.Minute)).Sub(now())
}

// owns reports whether uid is among owners.
func owns(owners []metav1.OwnerReference, uid types.UID) bool {
	return slices.ContainsFunc(owners, func(r metav1.OwnerReference) bool { return r.UID == uid })
}

// without returns owners without uid.
func without(owners []metav1.OwnerReference, uid types.UID) []metav1.OwnerReference {
	return slices.DeleteFunc(slices.Clone(owners), func(r metav1.OwnerReference) bool { return r.UID == uid })
}

// gvkOf is the GroupVersionKind of a snapshot of kind (pin.ConfigMap or
// pin.Secret).
func gvkOf(kind string) schema.GroupVersionKind {
	if kind == pin.Secret {
		return schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	}
	return schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
}
