package packed_test

import (
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/watcher-dev/watcher/internal/packed"
)

func stored() *metav1.PartialObjectMetadata {
	deleted := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: "web", Namespace: "shop", UID: "u-1", ResourceVersion: "42", Generation: 7,
		DeletionTimestamp: &deleted,
		OwnerReferences:   []metav1.OwnerReference{{APIVersion: "bitnami.com/v1alpha1", Kind: "SealedSecret", Name: "web", UID: "u-0"}},
		Labels:            map[string]string{"app": "web"},
		Annotations:       map[string]string{"z": "last", "a": "first", "m": ""},
	}}
	m.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	return m
}

// TestRoundTrip: Meta gives back every field Pack kept, as a copy.
func TestRoundTrip(t *testing.T) {
	m := stored()
	o := packed.Pack(m)
	if diff := cmp.Diff(m, o.Meta()); diff != "" {
		t.Errorf("Meta(Pack(m)) (-want +got):\n%s", diff)
	}
	// Neither the source nor a result shares anything with o.
	m.Annotations["a"] = "changed"
	m.Labels["app"] = "changed"
	m.OwnerReferences[0].Name = "changed"
	got := o.Meta()
	got.Annotations["z"] = "changed"
	got.Labels["app"] = "changed"
	got.OwnerReferences[0].Name = "changed"
	got.DeletionTimestamp.Time = got.DeletionTimestamp.AddDate(1, 0, 0)
	if diff := cmp.Diff(stored().ObjectMeta.OwnerReferences, o.Meta().OwnerReferences); diff != "" || o.GetLabels()["app"] != "web" {
		t.Errorf("changing the source or Meta's result changed o: %+v", o.Meta())
	}
	if d := o.GetDeletionTimestamp(); d.Year() != 2026 {
		t.Errorf("changing Meta's deletion time changed o: %v", d)
	}
	if v, _ := o.Annotation("a"); v != "first" {
		t.Errorf("changing the packed source changed o: a=%q", v)
	}
	if v, _ := o.Annotation("z"); v != "last" {
		t.Errorf("changing Meta's result changed o: z=%q", v)
	}
	// Fields never kept are dropped, not an error.
	m.Finalizers = []string{"f"}
	if fs := packed.Pack(m).GetFinalizers(); fs != nil {
		t.Errorf("finalizers kept: %v", fs)
	}
}

// TestAnnotation: one value without the map; absent and empty told apart.
func TestAnnotation(t *testing.T) {
	o := packed.Pack(stored())
	for key, want := range map[string]struct {
		v  string
		ok bool
	}{"a": {"first", true}, "m": {"", true}, "z": {"last", true}, "b": {"", false}, "": {"", false}, "zz": {"", false}} {
		v, ok := o.Annotation(key)
		if v != want.v || ok != want.ok {
			t.Errorf("Annotation(%q) = %q, %t; want %q, %t", key, v, ok, want.v, want.ok)
		}
		v, ok = packed.Annotation(o, key)
		if v != want.v || ok != want.ok {
			t.Errorf("packed.Annotation(o, %q) = %q, %t", key, v, ok)
		}
	}
	if v, ok := packed.Annotation(stored(), "a"); v != "first" || !ok {
		t.Errorf("packed.Annotation of a PartialObjectMetadata = %q, %t", v, ok)
	}
	empty := packed.Pack(&metav1.PartialObjectMetadata{})
	if _, ok := empty.Annotation("a"); ok || empty.GetAnnotations() != nil {
		t.Errorf("an object with no annotations has some")
	}
}

// TestKindPerObject: the kind is shared by value, never by reference:
// setting one object's kind leaves the others alone.
func TestKindPerObject(t *testing.T) {
	a, b := packed.Pack(stored()), packed.Pack(stored())
	a.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
	if got := b.GroupVersionKind().Kind; got != "Deployment" {
		t.Errorf("b's kind = %s after a's changed", got)
	}
	none := packed.Pack(&metav1.PartialObjectMetadata{})
	if !none.GroupVersionKind().Empty() {
		t.Errorf("no kind given, got %v", none.GroupVersionKind())
	}
}

// TestDeepCopy: a copy shares nothing that a setter or a caller changes.
func TestDeepCopy(t *testing.T) {
	o := packed.Pack(stored())
	c := o.DeepCopyObject().(*packed.Object)
	if diff := cmp.Diff(o.Meta(), c.Meta()); diff != "" {
		t.Fatalf("copy differs (-o +copy):\n%s", diff)
	}
	c.SetAnnotations(map[string]string{"b": "2"})
	c.GetOwnerReferences()[0].Name = "other"
	c.SetLabels(nil)
	c.SetDeletionTimestamp(nil)
	if diff := cmp.Diff(stored().ObjectMeta.Annotations, o.GetAnnotations()); diff != "" {
		t.Errorf("changing the copy changed o's annotations:\n%s", diff)
	}
	if o.GetOwnerReferences()[0].Name != "web" || o.GetLabels()["app"] != "web" || o.GetDeletionTimestamp() == nil {
		t.Errorf("changing the copy changed o: %+v", o.Meta())
	}
	if c.GetLabels() != nil || c.GetDeletionTimestamp() != nil || c.GetOwnerReferences()[0].Name != "other" {
		t.Errorf("copy after setters: %+v", c.Meta())
	}
}

// TestInformerKey: client-go keys and indexes an Object like any object.
func TestInformerKey(t *testing.T) {
	o := packed.Pack(stored())
	key, err := toolscache.MetaNamespaceKeyFunc(o)
	if err != nil || key != "shop/web" {
		t.Errorf("key = %q, %v", key, err)
	}
	acc, err := meta.Accessor(o)
	if err != nil || acc.GetResourceVersion() != "42" || acc.GetGeneration() != 7 {
		t.Errorf("meta.Accessor = %v, %v", acc, err)
	}
}

// TestSmall: the packed form is the point of the package; a struct that
// grows past 112 bytes (its size class) is a choice to make knowingly.
func TestSmall(t *testing.T) {
	if n := unsafe.Sizeof(packed.Object{}); n > 112 {
		t.Errorf("Object is %d bytes", n)
	}
}
