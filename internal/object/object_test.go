package object

import (
	"slices"
	"testing"
)

func TestString(t *testing.T) {
	for _, tc := range []struct {
		ref  Ref
		want string
	}{
		{Ref{Kind: "Deployment", Namespace: "shop", Name: "web"}, "Deployment shop/web"},
		{Ref{Kind: "ConfigMap", Namespace: "a b", Name: "x/y"}, "ConfigMap a b/x/y"},
		{Ref{}, ""},
	} {
		if got := tc.ref.String(); got != tc.want {
			t.Errorf("%#v.String() = %q, want %q", tc.ref, got, tc.want)
		}
	}
}

func TestCompare(t *testing.T) {
	refs := []Ref{{"Deployment", "b", "a"}, {"StatefulSet", "a", "b"}, {"Deployment", "a", "b"}, {"Deployment", "a", "a"}}
	slices.SortFunc(refs, Compare)
	want := []Ref{{"Deployment", "a", "a"}, {"Deployment", "a", "b"}, {"StatefulSet", "a", "b"}, {"Deployment", "b", "a"}}
	if !slices.Equal(refs, want) {
		t.Errorf("sorted %v, want %v", refs, want)
	}
}

func TestNamespaces(t *testing.T) {
	if got := Namespaces(nil); !slices.Equal(got, []string{""}) {
		t.Errorf("Namespaces(nil) = %q, want every namespace", got)
	}
	if got := Namespaces([]string{"a", "b"}); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Namespaces(a, b) = %q", got)
	}
	if got := NotIn(nil); got != "" {
		t.Errorf("NotIn(nil) = %q, want none", got)
	}
	if got, want := NotIn([]string{"kube-system", "team-a"}), "metadata.namespace!=kube-system,metadata.namespace!=team-a"; got != want {
		t.Errorf("NotIn = %q, want %q", got, want)
	}
}
