package slim_test

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/watcher-dev/watcher/internal/slim"
)

// TestLabels: labels kept as one string read like a map, by selectors
// too; an object that is not stored is read from its metadata.
func TestLabels(t *testing.T) {
	m := map[string]string{"app.kubernetes.io/name": "web", "tier": "", "b": "2", "odd,key": "x"}
	enc := slim.EncodeLabels(m)
	if enc != slim.EncodeLabels(map[string]string{"tier": "", "b": "2", "app.kubernetes.io/name": "web"}) {
		t.Errorf("EncodeLabels differs for the same labels")
	}
	if strings.Contains(enc, "app.kubernetes.io") || len(enc) > len("app.kubernetes.io/name=web,b=2,tier=") {
		t.Errorf("EncodeLabels = %q: keys written in full", enc)
	}
	stored := &metav1.PartialObjectMetadata{ObjectMeta: slim.Meta(metav1.ObjectMeta{Name: "x", Labels: m}, nil)}
	if stored.Labels != nil {
		t.Errorf("labels kept as a map too: %v", stored.Labels)
	}
	fresh := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: m}}
	for _, obj := range []*metav1.PartialObjectMetadata{stored, fresh} {
		l := slim.Labels(obj)
		for _, tt := range []struct {
			key, value string
			has        bool
		}{
			{"app.kubernetes.io/name", "web", true}, {"tier", "", true}, {"b", "2", true},
			{"app", "", false}, {"app.kubernetes.io/nam", "", false}, {"web", "", false},
		} {
			if v, ok := l.Lookup(tt.key); v != tt.value || ok != tt.has || l.Has(tt.key) != tt.has || l.Get(tt.key) != tt.value {
				t.Errorf("%T: Lookup(%q) = %q, %v; want %q, %v", l, tt.key, v, ok, tt.value, tt.has)
			}
		}
		for sel, want := range map[string]bool{
			"app.kubernetes.io/name=web": true, "app.kubernetes.io/name in (a,web),b": true, "tier": true,
			"!tier": false, "b!=2": false, "app.kubernetes.io/name=api": false, "": true,
		} {
			s, err := labels.Parse(sel)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Matches(l); got != want {
				t.Errorf("%T: %q matches: %v, want %v", l, sel, got, want)
			}
		}
	}
	none := &metav1.PartialObjectMetadata{ObjectMeta: slim.Meta(metav1.ObjectMeta{Name: "x"}, nil)}
	if none.Annotations != nil || slim.Labels(none).Has("a") {
		t.Errorf("no labels: %v", none.Annotations)
	}
}

// TestEncodeLabelsTells: two label sets are encoded alike if and only if
// the labels kept of them are equal (package policy memoizes by the
// encoding); a key that begins like a numbered one is left out.
func TestEncodeLabelsTells(t *testing.T) {
	sets := []map[string]string{
		nil, {"a": ""}, {"a": "b"}, {"a": "b", "c": "d"}, {"a": "b,c=d"}, {"a=b": ""}, {"ab": ""},
		{"\x01\x80\x80": "x"}, {"\x01\x80\x80": "x", "a": "b"}, {"app.kubernetes.io/name": "a"},
	}
	kept := func(m map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			if !strings.ContainsAny(k, "=,") && !strings.ContainsAny(v, ",") && !strings.HasPrefix(k, "\x01") {
				out[k] = v
			}
		}
		return out
	}
	for _, a := range sets {
		enc := slim.EncodeLabels(a)
		for _, b := range sets {
			if same := slim.EncodeLabels(b) == enc; same != maps.Equal(kept(a), kept(b)) {
				t.Errorf("%v and %v encoded alike: %v", a, b, same)
			}
		}
		l := slim.Labels(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{slim.LabelsAnnotation: enc}}})
		for k := range a {
			if got, ok := l.Lookup(k); ok != (len(kept(map[string]string{k: a[k]})) == 1) || ok && got != a[k] {
				t.Errorf("%v: Lookup(%q) = %q, %v", a, k, got, ok)
			}
		}
	}
}

// TestManyLabelKeys: past the numbered keys, keys are written in full and
// read back alike.
func TestManyLabelKeys(t *testing.T) {
	for i := range 5000 {
		k := fmt.Sprintf("k%d.example.com/key", i)
		enc := slim.EncodeLabels(map[string]string{k: "v", "app": "web"})
		l := slim.Labels(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{slim.LabelsAnnotation: enc}}})
		if l.Get(k) != "v" || l.Get("app") != "web" || l.Has("k") {
			t.Fatalf("%s: read %q as %q, %q", k, enc, l.Get(k), l.Get("app"))
		}
	}
}
