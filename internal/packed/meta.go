package packed

import (
	"maps"
	"slices"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// GetObjectKind implements runtime.Object: o is its own ObjectKind, so
// that setting the kind of one object never changes the others'.
func (o *Object) GetObjectKind() schema.ObjectKind { return o }

// GroupVersionKind implements schema.ObjectKind.
func (o *Object) GroupVersionKind() schema.GroupVersionKind {
	if o.kind == (unique.Handle[metav1.TypeMeta]{}) {
		return schema.GroupVersionKind{}
	}
	tm := o.kind.Value()
	return tm.GroupVersionKind()
}

// SetGroupVersionKind implements schema.ObjectKind.
func (o *Object) SetGroupVersionKind(gvk schema.GroupVersionKind) {
	if gvk.Empty() {
		o.kind = unique.Handle[metav1.TypeMeta]{}
		return
	}
	var tm metav1.TypeMeta
	tm.SetGroupVersionKind(gvk)
	o.kind = unique.Make(tm)
}

// DeepCopyObject implements runtime.Object.
func (o *Object) DeepCopyObject() runtime.Object {
	out := *o
	if o.rare != nil {
		out.rare = &rare{
			deletion: o.rare.deletion.DeepCopy(),
			owners:   copyOwners(o.rare.owners),
			labels:   maps.Clone(o.rare.labels),
		}
	}
	out.annotations = slices.Clone(o.annotations)
	return &out
}

// GetName implements metav1.Object.
func (o *Object) GetName() string { return o.name }

// SetName implements metav1.Object.
func (o *Object) SetName(name string) { o.name = name }

// GetNamespace implements metav1.Object.
func (o *Object) GetNamespace() string { return o.namespace }

// SetNamespace implements metav1.Object.
func (o *Object) SetNamespace(namespace string) { o.namespace = namespace }

// GetUID implements metav1.Object.
func (o *Object) GetUID() types.UID { return o.uid }

// SetUID implements metav1.Object.
func (o *Object) SetUID(uid types.UID) { o.uid = uid }

// GetResourceVersion implements metav1.Object.
func (o *Object) GetResourceVersion() string { return o.resourceVersion }

// SetResourceVersion implements metav1.Object.
func (o *Object) SetResourceVersion(version string) { o.resourceVersion = version }

// GetGeneration implements metav1.Object.
func (o *Object) GetGeneration() int64 { return o.generation }

// SetGeneration implements metav1.Object.
func (o *Object) SetGeneration(generation int64) { o.generation = generation }

// GetDeletionTimestamp implements metav1.Object.
func (o *Object) GetDeletionTimestamp() *metav1.Time {
	if o.rare == nil {
		return nil
	}
	return o.rare.deletion
}

// SetDeletionTimestamp implements metav1.Object.
func (o *Object) SetDeletionTimestamp(t *metav1.Time) {
	o.setRare(func(r *rare) { r.deletion = t })
}

// GetOwnerReferences implements metav1.Object.
func (o *Object) GetOwnerReferences() []metav1.OwnerReference {
	if o.rare == nil {
		return nil
	}
	return o.rare.owners
}

// SetOwnerReferences implements metav1.Object.
func (o *Object) SetOwnerReferences(owners []metav1.OwnerReference) {
	o.setRare(func(r *rare) { r.owners = owners })
}

// GetLabels implements metav1.Object. The store keeps labels as an
// annotation (slim.LabelsAnnotation): this is nil for most objects.
func (o *Object) GetLabels() map[string]string {
	if o.rare == nil {
		return nil
	}
	return o.rare.labels
}

// SetLabels implements metav1.Object.
func (o *Object) SetLabels(labels map[string]string) {
	o.setRare(func(r *rare) { r.labels = labels })
}

// setRare changes o's rare fields with set, and drops them once all are
// empty.
func (o *Object) setRare(set func(*rare)) {
	r := rare{}
	if o.rare != nil {
		r = *o.rare
	}
	set(&r)
	if r.deletion == nil && len(r.owners) == 0 && len(r.labels) == 0 {
		o.rare = nil
		return
	}
	o.rare = &r
}

// GetAnnotations implements metav1.Object: a new map on each call (nil if
// o has none), which the caller may change without changing o.
func (o *Object) GetAnnotations() map[string]string {
	if len(o.annotations) == 0 {
		return nil
	}
	out := make(map[string]string, len(o.annotations)/2)
	for i := 0; i < len(o.annotations); i += 2 {
		out[o.annotations[i]] = o.annotations[i+1]
	}
	return out
}

// SetAnnotations implements metav1.Object. The map is not kept.
func (o *Object) SetAnnotations(annotations map[string]string) {
	if len(annotations) == 0 {
		o.annotations = nil
		return
	}
	keys := slices.Sorted(maps.Keys(annotations))
	out := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		out = append(out, k, annotations[k])
	}
	o.annotations = out
}

// The fields below are never kept (see Object).

// GetGenerateName implements metav1.Object: always "".
func (o *Object) GetGenerateName() string { return "" }

// SetGenerateName implements metav1.Object: dropped.
func (o *Object) SetGenerateName(string) {}

// GetSelfLink implements metav1.Object: always "".
func (o *Object) GetSelfLink() string { return "" }

// SetSelfLink implements metav1.Object: dropped.
func (o *Object) SetSelfLink(string) {}

// GetCreationTimestamp implements metav1.Object: always zero.
func (o *Object) GetCreationTimestamp() metav1.Time { return metav1.Time{} }

// SetCreationTimestamp implements metav1.Object: dropped.
func (o *Object) SetCreationTimestamp(metav1.Time) {}

// GetDeletionGracePeriodSeconds implements metav1.Object: always nil.
func (o *Object) GetDeletionGracePeriodSeconds() *int64 { return nil }

// SetDeletionGracePeriodSeconds implements metav1.Object: dropped.
func (o *Object) SetDeletionGracePeriodSeconds(*int64) {}

// GetFinalizers implements metav1.Object: always nil.
func (o *Object) GetFinalizers() []string { return nil }

// SetFinalizers implements metav1.Object: dropped.
func (o *Object) SetFinalizers([]string) {}

// GetManagedFields implements metav1.Object: always nil.
func (o *Object) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }

// SetManagedFields implements metav1.Object: dropped.
func (o *Object) SetManagedFields([]metav1.ManagedFieldsEntry) {}
