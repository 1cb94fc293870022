package policy_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watcher-dev/watcher/api/v1alpha1"
	"github.com/watcher-dev/watcher/internal/packed"
	"github.com/watcher-dev/watcher/internal/policy"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/resolve"
)

// configs is a resolve.Configs of fixed objects, all in namespace "shop".
type configs map[refs.Kind][]*metav1.PartialObjectMetadata

func (c configs) List(kind refs.Kind, _ string) ([]*packed.Object, error) {
	return packed.PackAll(c[kind]), nil
}

func cfg(name string, labels map[string]string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: labels}}
}

// web is a Deployment of "shop" labelled app=web whose pod spec reads every
// key of ConfigMap "used" and key "a" of ConfigMap "partial".
func web(ns string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:    "app",
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "used"}}}},
			Env: []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "partial"}, Key: "a"}}}},
		}}}}},
	}
}

func rp(name string, sources []v1alpha1.Source, targets ...v1alpha1.Target) *v1alpha1.ReloadPolicy {
	return &v1alpha1.ReloadPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Generation: 1},
		Spec: v1alpha1.ReloadPolicySpec{Sources: sources, Targets: targets}}
}

var (
	used    = refs.Ref{Kind: refs.ConfigMap, Name: "used", AllKeys: true}
	partial = refs.Ref{Kind: refs.ConfigMap, Name: "partial", Keys: []string{"a"}, Required: []string{"a"}}
	byName  = func(kind v1alpha1.SourceKind, name string, keys ...string) v1alpha1.Source {
		return v1alpha1.Source{Kind: kind, Name: name, Keys: keys}
	}
	bySelector = func(kind v1alpha1.SourceKind, labels map[string]string, keys ...string) v1alpha1.Source {
		return v1alpha1.Source{Kind: kind, Selector: &metav1.LabelSelector{MatchLabels: labels}, Keys: keys}
	}
	webTarget = v1alpha1.Target{Kind: v1alpha1.TargetDeployment, Name: "web"}
)

// TestReferences: the references a workload gets from the policies of
// its namespace, resolved with its pod spec, one case per row of the
// package table and the keys filter.
func TestReferences(t *testing.T) {
	objects := configs{
		refs.ConfigMap: {cfg("used", nil), cfg("partial", nil), cfg("blue", map[string]string{"tier": "api"}), cfg("red", nil)},
		refs.Secret:    {cfg("token", map[string]string{"tier": "api"})},
	}
	tests := []struct {
		name     string
		policies []*v1alpha1.ReloadPolicy
		ns       string
		want     []refs.Ref
		named    []string // Applied.Named
	}{
		{"no policy: the pod spec", nil, "shop", []refs.Ref{partial, used}, nil},
		{"a target gets a source by name, every key, optional", []*v1alpha1.ReloadPolicy{rp("p", []v1alpha1.Source{byName("Secret", "other")}, webTarget)}, "shop",
			[]refs.Ref{partial, used, {Kind: refs.Secret, Name: "other", AllKeys: true, Optional: true}}, []string{"Secret/other"}},
		{"the keys listed only", []*v1alpha1.ReloadPolicy{rp("p", []v1alpha1.Source{byName("ConfigMap", "red", "x", "y")}, webTarget)}, "shop",
			[]refs.Ref{partial, {Kind: refs.ConfigMap, Name: "red", Keys: []string{"x", "y"}, Optional: true}, used}, []string{"ConfigMap/red"}},
		{"a source the pod spec reads whole narrows to its keys", []*v1alpha1.ReloadPolicy{rp("p", []v1alpha1.Source{byName("ConfigMap", "used", "LOG_LEVEL")}, webTarget)}, "shop",
			[]refs.Ref{partial, {Kind: refs.ConfigMap, Name: "used", Keys: []string{"LOG_LEVEL"}}}, []string{"ConfigMap/used"}},
		{"narrowed, a required key stays required", []*v1alpha1.ReloadPolicy{rp("p", []v1alpha1.Source{byName("ConfigMap", "partial", "b")}, webTarget)}, "shop",
			[]refs.Ref{{Kind: refs.ConfigMap, Name: "partial", Keys: []string{"b"}, Required: []string{"a"}}, used}, []string{"ConfigMap/partial"}},
		{"a second source listing no key: every key", []*v1alpha1.ReloadPolicy{
			rp("p", []v1alpha1.Source{byName("ConfigMap", "used", "LOG_LEVEL")}, webTarget),
			rp("q", []v1alpha1.Source{byName("ConfigMap", "used")}, webTarget)}, "shop",
			[]refs.Ref{partial, used}, []string{"ConfigMap/used"}},
		{"two policies' keys united", []*v1alpha1.ReloadPolicy{
			rp("p", []v1alpha1.Source{byName("ConfigMap", "used", "A")}, webTarget),
			rp("q", []v1alpha1.Source{byName("ConfigMap", "used", "B")}, webTarget)}, "shop",
			[]refs.Ref{partial, {Kind: refs.ConfigMap, Name: "used", Keys: []string{"A", "B"}}}, []string{"ConfigMap/used"}},
		{"a selector matches objects by labels", []*v1alpha1.ReloadPolicy{rp("p", []v1alpha1.Source{bySelector("ConfigMap", map[string]string{"tier": "api"})}, webTarget)}, "shop",
			[]refs.Ref{{Kind: refs.ConfigMap, Name: "blue", AllKeys: true, Optional: true}, partial, used}, []string{"ConfigMap/blue"}},
		{"a selector of Secrets matches Secrets only", []*v1alpha1.ReloadPolicy{rp("p", []v1alpha1.Source{bySelector("Secret", map[string]string{"tier": "api"}, "k")}, webTarget)}, "shop",
			[]refs.Ref{partial, used, {Kind: refs.Secret, Name: "token", Keys: []string{"k"}, Optional: true}}, []string{"Secret/token"}},
		{"a target by selector", []*v1alpha1.ReloadPolicy{rp("p", []v1alpha1.Source{byName("ConfigMap", "red")}, v1alpha1.Target{Kind: "Deployment", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}})}, "shop",
			[]refs.Ref{partial, {Kind: refs.ConfigMap, Name: "red", AllKeys: true, Optional: true}, used}, []string{"ConfigMap/red"}},
		{"a target selector that does not match", []*v1alpha1.ReloadPolicy{rp("p", []v1alpha1.Source{byName("ConfigMap", "red")}, v1alpha1.Target{Kind: "Deployment", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}})}, "shop",
			[]refs.Ref{partial, used}, nil},
		{"a target of another kind", []*v1alpha1.ReloadPolicy{rp("p", []v1alpha1.Source{byName("ConfigMap", "red")}, v1alpha1.Target{Kind: "StatefulSet", Name: "web"})}, "shop",
			[]refs.Ref{partial, used}, nil},
		{"a policy of another namespace: nothing", []*v1alpha1.ReloadPolicy{rp("p", []v1alpha1.Source{byName("ConfigMap", "red")}, webTarget)}, "elsewhere",
			[]refs.Ref{partial, used}, nil},
		{"no targets: consumers keep their references, narrowed", []*v1alpha1.ReloadPolicy{rp("p", []v1alpha1.Source{byName("ConfigMap", "used", "LOG_LEVEL")})}, "shop",
			[]refs.Ref{partial, {Kind: refs.ConfigMap, Name: "used", Keys: []string{"LOG_LEVEL"}}}, []string{"ConfigMap/used"}},
		{"no targets, a source the pod spec does not use: nothing", []*v1alpha1.ReloadPolicy{rp("p", []v1alpha1.Source{byName("ConfigMap", "red")})}, "shop",
			[]refs.Ref{partial, used}, nil},
		{"an invalid target selector selects nothing", []*v1alpha1.ReloadPolicy{rp("p", []v1alpha1.Source{byName("ConfigMap", "red")}, v1alpha1.Target{Kind: "Deployment", Selector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}})}, "shop",
			[]refs.Ref{partial, used}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := policy.NewIndex()
			for _, p := range tt.policies {
				ix.Set(policy.Compile(p))
			}
			r := resolve.New(resolve.Options{Sources: []resolve.Source{resolve.PodSpec{}, policy.References{Index: ix}}})
			obj := web(tt.ns)
			got, err := r.Resolve(obj, objects)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Resolve (-want +got):\n%s", diff)
			}
			a, err := ix.For(obj, got, objects)
			if err != nil {
				t.Fatal(err)
			}
			var named []string
			for _, u := range got {
				if a.Named[u.ID()] {
					named = append(named, u.ID())
				}
			}
			if diff := cmp.Diff(tt.named, named); diff != "" {
				t.Errorf("Named (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStoredReferences: a stored workload carries what the policies gave
// it when stored (Annotate), and the store's index functions read only
// that, so that they answer alike until the workload is stored again.
func TestStoredReferences(t *testing.T) {
	ix := policy.NewIndex()
	src := policy.References{Index: ix}
	r := resolve.New(resolve.Options{Sources: []resolve.Source{resolve.PodSpec{}, src}})
	stored := func() *metav1.PartialObjectMetadata {
		m := &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"watcher.dev/cached/refs": ""}},
		}
		src.Annotate(m)
		return m
	}
	before := stored()
	if _, ok := before.Annotations[policy.RefsAnnotation]; ok {
		t.Fatalf("no policy, yet annotated: %v", before.Annotations)
	}
	ix.Set(policy.Compile(rp("p", []v1alpha1.Source{byName("ConfigMap", "red"), bySelector("Secret", map[string]string{"tier": "api"})}, webTarget)))
	if got, _ := r.Refs(before); len(got) != 0 {
		t.Errorf("the stored object changed its answer: %v", got)
	}
	if got := r.Wildcards(before); len(got) != 0 {
		t.Errorf("the stored object changed its wildcards: %v", got)
	}
	after := stored()
	got, err := r.Refs(after)
	if err != nil || !cmp.Equal(got, []refs.Ref{{Kind: refs.ConfigMap, Name: "red", AllKeys: true, Optional: true}}) {
		t.Errorf("Refs after = %v, %v", got, err)
	}
	if got := r.Wildcards(after); !cmp.Equal(got, []refs.Kind{refs.Secret}) {
		t.Errorf("Wildcards after = %v", got)
	}
	ix.Delete("shop", "p")
	if got, _ := r.Refs(after); len(got) != 1 {
		t.Errorf("the stored object changed its answer after the deletion: %v", got)
	}
	if got := stored(); len(got.Annotations) != 1 {
		t.Errorf("stored again after the deletion: %v", got.Annotations)
	}
}

// TestCoalesce: the longest coalesce of the policies naming an object.
func TestCoalesce(t *testing.T) {
	ix := policy.NewIndex()
	p := rp("p", []v1alpha1.Source{byName("ConfigMap", "a")})
	p.Spec.Coalesce = &metav1.Duration{Duration: 30 * time.Second}
	q := rp("q", []v1alpha1.Source{bySelector("ConfigMap", map[string]string{"tier": "api"})})
	q.Spec.Coalesce = &metav1.Duration{Duration: time.Minute}
	ix.Set(policy.Compile(p))
	ix.Set(policy.Compile(q))
	for _, tt := range []struct {
		obj  *metav1.PartialObjectMetadata
		kind refs.Kind
		want time.Duration
	}{
		{cfg("a", nil), refs.ConfigMap, 30 * time.Second},
		{cfg("a", map[string]string{"tier": "api"}), refs.ConfigMap, time.Minute},
		{cfg("a", nil), refs.Secret, 0},
		{cfg("b", nil), refs.ConfigMap, 0},
	} {
		if got := ix.Coalesce(tt.kind, tt.obj); got != tt.want {
			t.Errorf("Coalesce(%s %s %v) = %s, want %s", tt.kind, tt.obj.Name, tt.obj.Labels, got, tt.want)
		}
	}
}
