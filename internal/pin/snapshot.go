package pin

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Snapshot returns the immutable copy of src (a ConfigMap or Secret, as
// read from the API server) named name and owned by owner: its content
// (and a Secret's type), none of its labels or annotations (so that no
// GitOps tool adopts or prunes it), SnapshotLabel and SnapshotOf. nil for
// any other object.
func Snapshot(src client.Object, name string, owner metav1.OwnerReference) client.Object {
	meta := metav1.ObjectMeta{
		Namespace:       src.GetNamespace(),
		Name:            name,
		Labels:          map[string]string{SnapshotLabel: "true"},
		OwnerReferences: []metav1.OwnerReference{owner},
	}
	switch o := src.(type) {
	case *corev1.ConfigMap:
		meta.Annotations = map[string]string{SnapshotOf: Source{ConfigMap, o.Name}.String()}
		return &corev1.ConfigMap{ObjectMeta: meta, Immutable: ptr.To(true),
			Data: maps.Clone(o.Data), BinaryData: maps.Clone(o.BinaryData)}
	case *corev1.Secret:
		meta.Annotations = map[string]string{SnapshotOf: Source{Secret, o.Name}.String()}
		return &corev1.Secret{ObjectMeta: meta, Immutable: ptr.To(true), Type: o.Type, Data: maps.Clone(o.Data)}
	}
	return nil
}

// IsSnapshot reports whether obj is a snapshot of source: labelled as
// one, naming source, immutable. (Whether its content is the one its name
// says is for the caller, which can hash it.)
func IsSnapshot(obj client.Object, source Source) bool {
	if obj.GetLabels()[SnapshotLabel] != "true" || obj.GetAnnotations()[SnapshotOf] != source.String() {
		return false
	}
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		return ptr.Deref(o.Immutable, false)
	case *corev1.Secret:
		return ptr.Deref(o.Immutable, false)
	}
	return false
}

// Owned returns the owners of a snapshot with owner among them (appended
// at the end when missing), and whether that changed them.
func Owned(owners []metav1.OwnerReference, owner metav1.OwnerReference) ([]metav1.OwnerReference, bool) {
	if slices.ContainsFunc(owners, func(o metav1.OwnerReference) bool { return o.UID == owner.UID }) {
		return owners, false
	}
	return append(slices.Clone(owners), owner), true
}

// Handed returns the owners of a snapshot once revision (a ReplicaSet or
// ControllerRevision) owns it in place of its workload (the UID
// workload): the workload owns a snapshot only until the revisions that
// pin it do, so that it goes with the last of them. The second result
// says whether that changed them.
func Handed(owners []metav1.OwnerReference, revision metav1.OwnerReference, workload string) ([]metav1.OwnerReference, bool) {
	out, changed := Owned(owners, revision)
	kept := slices.DeleteFunc(slices.Clone(out), func(o metav1.OwnerReference) bool { return string(o.UID) == workload })
	return kept, changed || len(kept) != len(out)
}
