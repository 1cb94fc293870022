package workload_test

import (
	"context"
	"slices"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/watcher-dev/watcher/internal/evict"
	"github.com/watcher-dev/watcher/internal/workload"
)

// TestEvictable: the kinds whose pods watcher evicts are the Deployment,
// the StatefulSet and the DaemonSet, and exactly those are kinds whose
// pods package evict can list.
func TestEvictable(t *testing.T) {
	var got []string
	r := fake.NewClientBuilder().Build()
	for _, k := range workload.Kinds {
		if k.Evictable {
			got = append(got, k.Name())
		}
		if _, err := evict.Pods(context.Background(), r, k.New()); (err == nil) != k.Evictable {
			t.Errorf("%s: Evictable %v, but evict.Pods says %v", k.Name(), k.Evictable, err)
		}
	}
	if want := []string{"Deployment", "StatefulSet", "DaemonSet"}; !slices.Equal(got, want) {
		t.Errorf("evictable kinds %v, want %v", got, want)
	}
}
