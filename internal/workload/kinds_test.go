package workload_test

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/workload"
)

// spec is the pod template every case carries.
var spec = corev1.PodTemplateSpec{
	ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"a": "1"}},
	Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}}},
}

// typedOf returns an object of kind k with spec as its template.
func typedOf(t *testing.T, k workload.Kind) client.Object {
	t.Helper()
	obj := k.New()
	tmpl, err := k.PodTemplate(obj)
	if err != nil {
		t.Fatalf("%s: template of an empty object: %v", k.Name(), err)
	}
	*tmpl = *spec.DeepCopy()
	return obj
}

// TestKinds: for every kind, the template is read from a typed object and
// from its unstructured form alike, the kind is found from either (a typed
// object from an informer has no TypeMeta), and New and NewList give
// objects of the kind.
func TestKinds(t *testing.T) {
	for _, k := range workload.Kinds {
		t.Run(k.Name(), func(t *testing.T) {
			typed := typedOf(t, k)
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{Object: m}
			u.SetGroupVersionKind(k.GVK)
			for name, obj := range map[string]client.Object{"typed": typed, "unstructured": u} {
				got, ok := workload.Of(obj)
				if !ok || got.GVK != k.GVK {
					t.Errorf("%s: Of() = %v, %v", name, got.GVK, ok)
				}
				tmpl, err := workload.PodTemplate(obj)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if tmpl.Annotations["a"] != "1" || tmpl.Spec.Containers[0].EnvFrom[0].ConfigMapRef.Name != "cfg" {
					t.Errorf("%s: template %+v", name, tmpl)
				}
			}
			if got, want := fmt.Sprintf("%T", k.NewList()), "*v1."+k.Name()+"List"; got != want {
				t.Errorf("NewList gives a %s, want a %s", got, want)
			}
			if byName, ok := workload.ByName(k.Name()); !ok || byName.GVK != k.GVK {
				t.Errorf("ByName(%s) = %v", k.Name(), byName.GVK)
			}
		})
	}
}

// TestKindOfOthers: objects that are no known workload, and stored
// metadata-only objects of a known kind, are told apart by GVK.
func TestKindOfOthers(t *testing.T) {
	if _, ok := workload.Of(&appsv1.ReplicaSet{}); ok {
		t.Error("a ReplicaSet is a workload")
	}
	if _, ok := workload.Of(&corev1.ConfigMap{}); ok {
		t.Error("a ConfigMap is a workload")
	}
	stored := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"}}
	if k, ok := workload.Of(stored); !ok || k.Name() != "StatefulSet" {
		t.Errorf("stored StatefulSet: %v, %v", k.GVK, ok)
	}
	if _, err := workload.PodTemplate(&appsv1.ReplicaSet{}); err == nil {
		t.Error("a template read from a ReplicaSet")
	}
}

// TestUnstructuredKind: a kind known only by its GVK and template path (a
// custom resource) is read from unstructured objects, at any depth.
func TestUnstructuredKind(t *testing.T) {
	k := workload.Kind{GVK: appsv1.SchemeGroupVersion.WithKind("Nested"), Template: []string{"spec", "jobTemplate", "spec", "template"}}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"jobTemplate": map[string]any{"spec": map[string]any{"template": m}}}}}
	u.SetGroupVersionKind(k.GVK)
	tmpl, err := k.PodTemplate(u)
	if err != nil || tmpl.Spec.Containers[0].Name != "app" {
		t.Fatalf("template %+v, %v", tmpl, err)
	}
	if _, ok := k.New().(*unstructured.Unstructured); !ok {
		t.Error("New of a kind with no Go type is not unstructured")
	}
	if _, err := k.PodTemplate(&unstructured.Unstructured{Object: map[string]any{}}); err == nil {
		t.Error("no error for an object without a template")
	}
}
