package workload_test

import (
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
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

// TestKinds: for every kind with a Go type, the template is read from a
// typed object and from its unstructured form alike, the kind is found from
// either (a typed object from an informer has no TypeMeta), and New and
// NewList give objects of the kind. Kinds with no Go type: TestRollout.
func TestKinds(t *testing.T) {
	for _, k := range workload.Kinds {
		if _, untyped := k.New().(*unstructured.Unstructured); untyped {
			continue
		}
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

// TestTemplatePaths: where each kind keeps its pod template (TestKinds
// checks that the path and the typed accessor agree), and that the typed
// accessor reaches the Go field of that place. One case per kind.
func TestTemplatePaths(t *testing.T) {
	tests := []struct {
		kind workload.Kind
		path []string
		read func(client.Object) *corev1.PodTemplateSpec
	}{
		{workload.Deployment, []string{"spec", "template"}, func(o client.Object) *corev1.PodTemplateSpec { return &o.(*appsv1.Deployment).Spec.Template }},
		{workload.StatefulSet, []string{"spec", "template"}, func(o client.Object) *corev1.PodTemplateSpec { return &o.(*appsv1.StatefulSet).Spec.Template }},
		{workload.DaemonSet, []string{"spec", "template"}, func(o client.Object) *corev1.PodTemplateSpec { return &o.(*appsv1.DaemonSet).Spec.Template }},
		{workload.CronJob, []string{"spec", "jobTemplate", "spec", "template"}, func(o client.Object) *corev1.PodTemplateSpec {
			return &o.(*batchv1.CronJob).Spec.JobTemplate.Spec.Template
		}},
		{workload.Job, []string{"spec", "template"}, func(o client.Object) *corev1.PodTemplateSpec { return &o.(*batchv1.Job).Spec.Template }},
		{workload.Rollout, []string{"spec", "template"}, nil}, // no Go type: TestRollout
	}
	if len(tests) != len(workload.Kinds) {
		t.Errorf("%d cases for %d kinds: every kind needs one", len(tests), len(workload.Kinds))
	}
	for _, tt := range tests {
		t.Run(tt.kind.Name(), func(t *testing.T) {
			if !slices.Equal(tt.kind.Template, tt.path) {
				t.Errorf("Template = %v, want %v", tt.kind.Template, tt.path)
			}
			if _, ok := workload.ByGVK(tt.kind.GVK); !ok {
				t.Errorf("%v is not in Kinds", tt.kind.GVK)
			}
			if tt.read == nil {
				return
			}
			typed := typedOf(t, tt.kind)
			if got := tt.read(typed); len(got.Spec.Containers) == 0 || got.Spec.Containers[0].Name != "app" {
				t.Errorf("the typed accessor wrote elsewhere than %v: %+v", tt.path, got)
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
	if _, ok := workload.Of(&corev1.Pod{}); ok {
		t.Error("a Pod is a workload")
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

// rollout returns an unstructured Rollout with the given spec, as the API
// server or a dynamic informer gives it.
func rollout(spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "web", "namespace": "shop"}, "spec": spec}}
	u.SetGroupVersionKind(workload.Rollout.GVK)
	return u
}

// TestRollout: Argo's Rollout has no Go type here. Its template is read at
// spec.template of an unstructured object; a Rollout whose template lives
// in a referenced Deployment (spec.workloadRef) has an empty template, so
// no references and no error; a Rollout with neither is an error.
func TestRollout(t *testing.T) {
	k := workload.Rollout
	if !k.Optional {
		t.Error("Rollout is not optional: watcher would need its CRD to start")
	}
	if got := k.GVR().String(); got != "argoproj.io/v1alpha1, Resource=rollouts" {
		t.Errorf("GVR = %s", got)
	}
	if _, ok := k.New().(*unstructured.Unstructured); !ok {
		t.Errorf("New gives a %T, want unstructured", k.New())
	}
	if _, ok := k.NewList().(*unstructured.UnstructuredList); !ok {
		t.Errorf("NewList gives a %T, want unstructured", k.NewList())
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
	if err != nil {
		t.Fatal(err)
	}
	workloadRef := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
	tests := []struct {
		name    string
		spec    map[string]any
		want    int // containers in the template
		wantErr bool
	}{
		{"template", map[string]any{"replicas": int64(2), "template": m}, 1, false},
		{"workloadRef, no template", map[string]any{"workloadRef": workloadRef}, 0, false},
		{"workloadRef and a template", map[string]any{"workloadRef": workloadRef, "template": m}, 1, false},
		{"neither", map[string]any{"replicas": int64(2)}, 0, true},
		{"workloadRef null", map[string]any{"workloadRef": nil}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := rollout(tt.spec)
			if got, ok := workload.Of(obj); !ok || got.GVK != k.GVK {
				t.Fatalf("Of() = %v, %v", got.GVK, ok)
			}
			tmpl, err := workload.PodTemplate(obj)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tt.wantErr)
			}
			if err == nil && len(tmpl.Spec.Containers) != tt.want {
				t.Errorf("%d containers, want %d", len(tmpl.Spec.Containers), tt.want)
			}
			uses, err := workload.Refs(obj)
			if err == nil && tt.want == 0 && len(uses) != 0 {
				t.Errorf("references %v of a Rollout without a template", uses)
			}
		})
	}
}

// TestRecreate: a Job, whose template is immutable, is the one kind a
// restart re-creates; every other kind is patched.
func TestRecreate(t *testing.T) {
	for _, k := range workload.Kinds {
		if got, want := k.Recreate, k.GVK == batchv1.SchemeGroupVersion.WithKind("Job"); got != want {
			t.Errorf("%s: Recreate = %v, want %v", k.Name(), got, want)
		}
	}
}
