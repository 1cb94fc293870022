package optin_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/watcher-dev/watcher/internal/optin"
)

func TestKeysAnnotations(t *testing.T) {
	keys := optin.Keys{optin.ReloaderAuto: "example.com/auto", optin.ConfigMapReload: "example.com/reload"}
	tests := []struct {
		name    string
		in, out map[string]string
	}{
		{"renamed", map[string]string{"example.com/auto": "true", "other": "x"},
			map[string]string{optin.ReloaderAuto: "true", "other": "x"}},
		{"watcher's own key is no longer read", map[string]string{optin.ReloaderAuto: "true", optin.ConfigMapReload: "a"},
			map[string]string{}},
		{"both: the installation's wins", map[string]string{optin.ReloaderAuto: "false", "example.com/auto": "true"},
			map[string]string{optin.ReloaderAuto: "true"}},
		{"keys not renamed are kept", map[string]string{optin.SecretReload: "s", "example.com/reload": "c"},
			map[string]string{optin.SecretReload: "s", optin.ConfigMapReload: "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := clone(tt.in)
			if diff := cmp.Diff(tt.out, keys.Annotations(tt.in)); diff != "" {
				t.Errorf("Annotations (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(in, tt.in); diff != "" {
				t.Errorf("Annotations changed its input:\n%s", diff)
			}
		})
	}
	// Two keys swapped are each read for the other's meaning.
	swap := optin.Keys{optin.ConfigMapReload: optin.SecretReload, optin.SecretReload: optin.ConfigMapReload}
	got := swap.Annotations(map[string]string{optin.ConfigMapReload: "c", optin.SecretReload: "s"})
	if diff := cmp.Diff(map[string]string{optin.ConfigMapReload: "s", optin.SecretReload: "c"}, got); diff != "" {
		t.Errorf("swapped (-want +got):\n%s", diff)
	}
	if err := swap.Validate(); err != nil {
		t.Errorf("a swap is valid: %v", err)
	}
}

func TestKeysValidate(t *testing.T) {
	for _, tt := range []struct {
		keys optin.Keys
		err  string
	}{
		{nil, ""},
		{optin.Keys{optin.Ignore: "example.com/ignore", optin.Match: "example.com/match"}, ""},
		{optin.Keys{"watcher.dev/auto": "example.com/auto"}, "cannot be renamed"},
		{optin.Keys{optin.ReloaderAuto: "not a key!"}, "annotation key"},
		{optin.Keys{optin.ReloaderAuto: "a/b/c"}, "annotation key"},
		{optin.Keys{optin.ReloaderAuto: "example.com/x", optin.Search: "example.com/x"}, "read for both"},
		{optin.Keys{optin.ReloaderAuto: optin.Search}, "read for both"},
	} {
		err := tt.keys.Validate()
		if (tt.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%v.Validate() = %v, want %q", tt.keys, err, tt.err)
		}
	}
}

func TestKeysRename(t *testing.T) {
	keys := optin.Keys{optin.ReloaderAuto: "example.com/auto", optin.ConfigMapReload: "example.com/reload"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{"example.com/auto": "true"}}}
	d.Spec.Template.Annotations = map[string]string{"example.com/reload": "cfg", optin.ConfigMapReload: "old"}
	keys.Rename(d)
	if diff := cmp.Diff(map[string]string{optin.ReloaderAuto: "true"}, d.Annotations); diff != "" {
		t.Errorf("Deployment annotations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{optin.ConfigMapReload: "cfg"}, d.Spec.Template.Annotations); diff != "" {
		t.Errorf("template annotations (-want +got):\n%s", diff)
	}

	r := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
		"metadata": map[string]any{"name": "r"},
		"spec":     map[string]any{"template": map[string]any{"metadata": map[string]any{"annotations": map[string]any{"example.com/reload": "cfg"}}}},
	}}
	keys.Rename(r)
	got, _, _ := unstructured.NestedStringMap(r.Object, "spec", "template", "metadata", "annotations")
	if diff := cmp.Diff(map[string]string{optin.ConfigMapReload: "cfg"}, got); diff != "" {
		t.Errorf("Rollout template annotations (-want +got):\n%s", diff)
	}
}

func clone(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
