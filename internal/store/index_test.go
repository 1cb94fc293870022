package store

import (
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/workload"
)

// TestIndexer checks the index function on stored workloads, including
// those whose references cannot be read: client-go panics when an index
// function returns an error, so it must never return one.
func TestIndexer(t *testing.T) {
	stored := func(encoded string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Annotations: map[string]string{workload.RefsAnnotation: encoded}},
		}
	}
	odd := refs.Encode([]refs.Ref{
		{Kind: refs.ConfigMap, Name: "x;y", AllKeys: true},
		{Kind: refs.ConfigMap, Name: "cfg", Keys: []string{"*", "a,b"}},
		{Kind: refs.Secret, Name: "a:b", AllKeys: true},
	})
	tests := []struct {
		name       string
		obj        any
		configMaps []string
		secrets    []string
		errors     float64 // counted per index function call
	}{
		{"ordinary", stored("ConfigMap/cfg:*;Secret/sec:a"), []string{"ns/cfg"}, []string{"ns/sec"}, 0},
		{"odd names and keys", stored(odd), []string{"ns/x;y", "ns/cfg"}, []string{"ns/a:b"}, 0},
		{"no references", stored(""), nil, nil, 0},
		{"unreadable references", stored("ConfigMap/x;y:*"), nil, nil, 1},
		{"not an object", "web", nil, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logged []string
			log := funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{})
			counter := metrics.Errors.WithLabelValues(ErrorOperation)
			before := testutil.ToFloat64(counter)
			for index, want := range map[string][]string{IndexConfigMaps: tt.configMaps, IndexSecrets: tt.secrets} {
				got, err := indexers(log, workload.Refs, nil)[index](tt.obj)
				if err != nil {
					t.Errorf("index %s returned an error: %v", index, err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("index %s (-want +got):\n%s", index, diff)
				}
			}
			if got := testutil.ToFloat64(counter) - before; got != 2*tt.errors {
				t.Errorf("errors counted: %v, want %v", got, 2*tt.errors)
			}
			if len(logged) != int(2*tt.errors) {
				t.Errorf("logged %q, want %v lines", logged, 2*tt.errors)
			}
			for _, l := range logged {
				if !strings.Contains(l, `"workload"="Deployment ns/web"`) {
					t.Errorf("log line %q does not name the workload", l)
				}
			}
		})
	}
}
