package slim_test

import (
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
	if want := "app.kubernetes.io/name=web,b=2,tier="; enc != want {
		t.Fatalf("EncodeLabels = %q, want %q", enc, want)
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
