package resolve_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/resolve"
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

// TestExplain: Explain finds what Refs finds, says which sources found each
// object, and keeps the ignored ones, marked.
func TestExplain(t *testing.T) {
	d := deployment("shop")
	d.Annotations = map[string]string{"configmap.reloader.stakater.com/reload": "cfg,extra"}
	r := resolve.Standard(resolve.Settings{IgnoreSecretNamespaces: []string{"shop"}})
	got, err := r.Explain(d)
	if err != nil {
		t.Fatal(err)
	}
	want := []resolve.Origin{
		{Ref: refs.Ref{Kind: refs.ConfigMap, Name: "cfg", AllKeys: true}, Sources: []string{"pod spec", "reload lists"}},
		{Ref: refs.Ref{Kind: refs.ConfigMap, Name: "extra", AllKeys: true, Optional: true}, Sources: []string{"reload lists"}},
		{Ref: refs.Ref{Kind: refs.Secret, Name: "sec", AllKeys: true}, Sources: []string{"pod spec"}, Ignored: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Explain (-want +got):\n%s", diff)
	}
	kept, err := r.Refs(d)
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
		t.Errorf("Explain's references not ignored differ from Refs (-Refs +Explain):\n%s", diff)
	}
}
