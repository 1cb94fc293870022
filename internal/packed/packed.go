// Package packed holds the compact form in which the store keeps each
// object: the fields of a metav1.PartialObjectMetadata that watcher's
// transforms fill (see packages slim and hash), in about a third of its
// memory.
//
// A PartialObjectMetadata weighs 288 bytes before its annotations, and its
// annotation map about 300 more even with two entries; at 20,000 watched
// objects that was a quarter of watcher's live heap. An Object keeps the
// same data in about 110 bytes and its annotations as one slice of
// strings, sorted by key.
//
// An Object is a client.Object, so that informers, their indexes and the
// controller's event handlers take it as is; readers that want the usual
// type ask for Meta, a new PartialObjectMetadata. GetAnnotations builds a
// new map on each call: Annotation reads one value without it.
package packed

import (
	"maps"
	"sort"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Object is an object as the store keeps it. The fields a
// PartialObjectMetadata has and an Object does not (creation time,
// finalizers, managed fields, generate name, self link, deletion grace
// period) are never filled by watcher's transforms: their setters drop
// what they are given.
type Object struct {
	// kind is the TypeMeta, shared by every object of its kind; zero:
	// none.
	kind                             unique.Handle[metav1.TypeMeta]
	name, namespace, resourceVersion string
	uid                              types.UID
	generation                       int64
	// rare holds the fields few objects have; nil: none.
	rare *rare
	// annotations are key, value, key, value..., sorted by key, each
	// key once.
	annotations []string
}

// rare holds the fields that few stored objects have.
type rare struct {
	deletion *metav1.Time
	owners   []metav1.OwnerReference
	labels   map[string]string
}

var (
	_ client.Object     = (*Object)(nil)
	_ schema.ObjectKind = (*Object)(nil)
	_ runtime.Object    = (*Object)(nil)
	_ metav1.Object     = (*Object)(nil)
)

// Pack returns m in packed form. m is not kept: a later change to it does
// not show in the Object.
func Pack(m *metav1.PartialObjectMetadata) *Object {
	o := &Object{
		name: m.Name, namespace: m.Namespace, resourceVersion: m.ResourceVersion,
		uid: m.UID, generation: m.Generation,
	}
	o.SetGroupVersionKind(m.GroupVersionKind())
	o.SetDeletionTimestamp(m.DeletionTimestamp.DeepCopy())
	o.SetOwnerReferences(copyOwners(m.OwnerReferences))
	o.SetLabels(maps.Clone(m.Labels))
	o.SetAnnotations(m.Annotations)
	return o
}

// copyOwners returns a deep copy of owners.
func copyOwners(owners []metav1.OwnerReference) []metav1.OwnerReference {
	if owners == nil {
		return nil
	}
	out := make([]metav1.OwnerReference, len(owners))
	for i := range owners {
		owners[i].DeepCopyInto(&out[i])
	}
	return out
}

// Meta returns o as a new PartialObjectMetadata, which the caller may
// change.
func (o *Object) Meta() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{
		ObjectMeta: metav1.ObjectMeta{
			Name: o.name, Namespace: o.namespace, ResourceVersion: o.resourceVersion,
			UID: o.uid, Generation: o.generation,
			DeletionTimestamp: o.GetDeletionTimestamp().DeepCopy(), OwnerReferences: copyOwners(o.GetOwnerReferences()),
			Labels: maps.Clone(o.GetLabels()), Annotations: o.GetAnnotations(),
		},
	}
	m.SetGroupVersionKind(o.GroupVersionKind())
	return m
}

// Annotation returns the value of the annotation key, and whether o has
// it, without building the map of GetAnnotations.
func (o *Object) Annotation(key string) (string, bool) {
	i := 2 * sort.Search(len(o.annotations)/2, func(i int) bool { return o.annotations[2*i] >= key })
	if i == len(o.annotations) || o.annotations[i] != key {
		return "", false
	}
	return o.annotations[i+1], true
}

// Annotation returns the annotation key of obj, and whether obj has it:
// without a new map for an Object.
func Annotation(obj metav1.Object, key string) (string, bool) {
	if o, ok := obj.(*Object); ok {
		return o.Annotation(key)
	}
	v, ok := obj.GetAnnotations()[key]
	return v, ok
}

// PackAll returns each of ms packed (Pack).
func PackAll(ms []*metav1.PartialObjectMetadata) []*Object {
	out := make([]*Object, 0, len(ms))
	for _, m := range ms {
		out = append(out, Pack(m))
	}
	return out
}
