package resolve_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/packed"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/resolve"
	"github.com/watcher-dev/watcher/internal/workload"
)

// fixed is a Source that finds the same references for every workload.
type fixed struct {
	rs  []refs.Ref
	err error
}

func (fixed) Name() string                             { return "fixed" }
func (f fixed) Refs(client.Object) ([]refs.Ref, error) { return f.rs, f.err }

func deployment(ns string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", EnvFrom: []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}},
			{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}}},
		}}},
	}}}}
}

// TestResolver: one case per row of the package tables.
func TestResolver(t *testing.T) {
	cfg := refs.Ref{Kind: refs.ConfigMap, Name: "cfg", AllKeys: true}
	sec := refs.Ref{Kind: refs.Secret, Name: "sec", AllKeys: true}
	other := refs.Ref{Kind: refs.ConfigMap, Name: "other", Keys: []string{"k"}}
	tests := []struct {
		name string
		o    resolve.Options
		ns   string
		want []refs.Ref
		err  bool
	}{
		{"pod spec by default", resolve.Options{}, "shop", []refs.Ref{cfg, sec}, false},
		{"ConfigMaps of an ignored namespace dropped", resolve.Options{IgnoreConfigMapNamespaces: []string{"shop"}}, "shop", []refs.Ref{sec}, false},
		{"Secrets of an ignored namespace dropped", resolve.Options{IgnoreSecretNamespaces: []string{"shop"}}, "shop", []refs.Ref{cfg}, false},
		{"another namespace ignored: nothing dropped", resolve.Options{IgnoreConfigMapNamespaces: []string{"kube-system"}}, "shop", []refs.Ref{cfg, sec}, false},
		{"sources united", resolve.Options{Sources: []resolve.Source{resolve.PodSpec{}, fixed{rs: []refs.Ref{other}}}}, "shop", []refs.Ref{cfg, other, sec}, false},
		{"a failing source fails the whole", resolve.Options{Sources: []resolve.Source{resolve.PodSpec{}, fixed{err: errors.New("bad")}}}, "shop", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resolve.New(tt.o).Refs(deployment(tt.ns))
			if (err != nil) != tt.err {
				t.Fatalf("error %v, want error: %v", err, tt.err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" && !tt.err {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestAnnotations: the reload lists' names are references, whole and
// optional; patterns and invalid entries find nothing; united with the pod
// spec, a name the pod spec uses too is read whole.
func TestAnnotations(t *testing.T) {
	d := deployment("shop")
	d.Annotations = map[string]string{
		"configmap.reloader.stakater.com/reload": "cfg, settings,app-.*,(bad",
		"secret.reloader.stakater.com/reload":    "tls",
	}
	whole := func(kind refs.Kind, name string) refs.Ref {
		return refs.Ref{Kind: kind, Name: name, AllKeys: true, Optional: true}
	}
	got, err := resolve.Annotations{}.Refs(d)
	if err != nil {
		t.Fatal(err)
	}
	want := []refs.Ref{whole(refs.ConfigMap, "cfg"), whole(refs.ConfigMap, "settings"), whole(refs.Secret, "tls")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	got, err = resolve.New(resolve.Options{Sources: []resolve.Source{resolve.PodSpec{}, resolve.Annotations{}}}).Refs(d)
	if err != nil {
		t.Fatal(err)
	}
	want = []refs.Ref{
		{Kind: refs.ConfigMap, Name: "cfg", AllKeys: true},
		whole(refs.ConfigMap, "settings"),
		{Kind: refs.Secret, Name: "sec", AllKeys: true},
		whole(refs.Secret, "tls"),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("united (-want +got):\n%s", diff)
	}
	if got, _ := (resolve.Annotations{}).Refs(deployment("shop")); got != nil {
		t.Errorf("no annotations: %v", got)
	}
}

// configs is a resolve.Configs over a fixed list.
type configs []*metav1.PartialObjectMetadata

func (c configs) List(kind refs.Kind, ns string) ([]*packed.Object, error) {
	var out []*metav1.PartialObjectMetadata
	for _, o := range c {
		if o.Kind == string(kind) && o.Namespace == ns {
			out = append(out, o)
		}
	}
	return packed.PackAll(out), nil
}

func stored(kind refs.Kind, ns, name string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: string(kind)}, ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// TestMatches: a reload list with patterns matches the objects of the
// workload's namespace and kind that an entry matches, whole and optional,
// united with the pod spec's; the store indexes the workload under the
// kinds it matches; an ignored namespace matches nothing.
func TestMatches(t *testing.T) {
	d := deployment("shop")
	d.Annotations = map[string]string{
		"configmap.reloader.stakater.com/reload": "app-.*, settings",
		"secret.reloader.stakater.com/reload":    "tls",
	}
	all := configs{
		stored(refs.ConfigMap, "shop", "app-a"), stored(refs.ConfigMap, "shop", "app-b"),
		stored(refs.ConfigMap, "shop", "other"), stored(refs.ConfigMap, "else", "app-c"),
		stored(refs.Secret, "shop", "app-s"),
	}
	whole := func(kind refs.Kind, name string) refs.Ref {
		return refs.Ref{Kind: kind, Name: name, AllKeys: true, Optional: true}
	}
	r := resolve.New(resolve.Options{Sources: []resolve.Source{resolve.PodSpec{}, resolve.Annotations{}}})
	if diff := cmp.Diff([]refs.Kind{refs.ConfigMap}, r.Wildcards(d)); diff != "" {
		t.Errorf("Wildcards (-want +got):\n%s", diff)
	}
	got, err := r.Resolve(d, all)
	if err != nil {
		t.Fatal(err)
	}
	want := []refs.Ref{
		whole(refs.ConfigMap, "app-a"), whole(refs.ConfigMap, "app-b"),
		{Kind: refs.ConfigMap, Name: "cfg", AllKeys: true},
		whole(refs.ConfigMap, "settings"),
		{Kind: refs.Secret, Name: "sec", AllKeys: true},
		whole(refs.Secret, "tls"),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Resolve (-want +got):\n%s", diff)
	}
	// Names only: no wildcard, nothing listed.
	plain := deployment("shop")
	plain.Annotations = map[string]string{"configmap.reloader.stakater.com/reload": "settings"}
	if w := r.Wildcards(plain); w != nil {
		t.Errorf("Wildcards of a list of names = %v", w)
	}
	ignoring := resolve.New(resolve.Options{Sources: []resolve.Source{resolve.PodSpec{}, resolve.Annotations{}}, IgnoreConfigMapNamespaces: []string{"shop"}})
	if w := ignoring.Wildcards(d); w != nil {
		t.Errorf("Wildcards in an ignored namespace = %v", w)
	}
	got, _ = ignoring.Resolve(d, all)
	for _, ref := range got {
		if ref.Kind == refs.ConfigMap {
			t.Errorf("ignored namespace: ConfigMap %s resolved", ref.Name)
		}
	}
}

// TestDelegated: an Argo Rollout whose template lives in a Deployment
// (spec.workloadRef) has no references, whatever its reload lists say: it
// is restarted through the Deployment, and a restart written on it would
// give it a template of its own. One with its own template has them.
func TestDelegated(t *testing.T) {
	r := resolve.New(resolve.Options{Sources: []resolve.Source{resolve.PodSpec{}, resolve.Annotations{}}})
	rollout := func(spec map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		u.SetGroupVersionKind(workload.Rollout.GVK)
		u.SetNamespace("shop")
		u.SetName("web")
		u.SetAnnotations(map[string]string{"configmap.reloader.stakater.com/reload": "settings, app-.*"})
		return u
	}
	byRef := rollout(map[string]any{"workloadRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}})
	got, err := r.Resolve(byRef, configs{stored(refs.ConfigMap, "shop", "app-a")})
	if err != nil || got != nil || r.Wildcards(byRef) != nil {
		t.Errorf("workloadRef Rollout: refs %v, wildcards %v, err %v; want none", got, r.Wildcards(byRef), err)
	}
	stored := byRef.DeepCopy()
	stored.SetAnnotations(map[string]string{workload.DelegatedAnnotation: "true", "configmap.reloader.stakater.com/reload": "settings"})
	if got, _ := r.Refs(stored); got != nil {
		t.Errorf("stored workloadRef Rollout: %v", got)
	}
	own := rollout(map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{}}}})
	if got, _ := r.Refs(own); len(got) != 1 {
		t.Errorf("Rollout with its own template: %v, want the reload list's settings", got)
	}
}

// TestExplain: Explain finds what Resolve finds, named or matched, says
// which sources found each object, and keeps the named ones of an ignored
// namespace, marked.
func TestExplain(t *testing.T) {
	d := deployment("shop")
	d.Annotations = map[string]string{"configmap.reloader.stakater.com/reload": "cfg,extra,app-.*"}
	all := configs{stored(refs.ConfigMap, "shop", "app-a"), stored(refs.ConfigMap, "shop", "other")}
	r := resolve.Standard(resolve.Settings{IgnoreSecretNamespaces: []string{"shop"}})
	got, err := r.Explain(d, all)
	if err != nil {
		t.Fatal(err)
	}
	whole := func(name string) refs.Ref {
		return refs.Ref{Kind: refs.ConfigMap, Name: name, AllKeys: true, Optional: true}
	}
	want := []resolve.Origin{
		{Ref: whole("app-a"), Sources: []string{"reload lists"}},
		{Ref: refs.Ref{Kind: refs.ConfigMap, Name: "cfg", AllKeys: true}, Sources: []string{"pod spec", "reload lists"}},
		{Ref: whole("extra"), Sources: []string{"reload lists"}},
		{Ref: refs.Ref{Kind: refs.Secret, Name: "sec", AllKeys: true}, Sources: []string{"pod spec"}, Ignored: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Explain (-want +got):\n%s", diff)
	}
	kept, err := r.Resolve(d, all)
	if err != nil {
		t.Fatal(err)
	}
	var notIgnored []refs.Ref
	for _, o := range got {
		if !o.Ignored {
			notIgnored = append(notIgnored, o.Ref)
		}
	}
	if diff := cmp.Diff(kept, notIgnored); diff != "" {
		t.Errorf("Explain's references not ignored differ from Resolve's (-Resolve +Explain):\n%s", diff)
	}
}
