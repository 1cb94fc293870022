package dryrun

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/workload"
)

// TestMemory: a record set is read back for its workload, Set tells a
// restart already kept (same record) from a new one, a forgotten record
// (nil) is kept as such, Drop forgets the workload, and a nil Memory holds
// nothing.
func TestMemory(t *testing.T) {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	key := workload.Key{Kind: workload.Deployment.Name(), Namespace: "shop", Name: "web"}
	a := plan.Record{"ConfigMap/cfg": {All: true, Keys: map[string]string{"k": "1"}}}
	b := plan.Record{"ConfigMap/cfg": {All: true, Keys: map[string]string{"k": "2"}}}
	steps := []struct {
		set      plan.Record
		wantKept bool
	}{
		{a, false}, // first: not kept before
		{a, true},  // the same restart, decided twice
		{b, false}, // the next change
		{nil, false},
		{b, false}, // after a forget
	}
	m := New()
	for i, s := range steps {
		if kept := m.Set(key, s.set); kept != s.wantKept {
			t.Errorf("step %d: Set(%v) kept = %v, want %v", i, s.set, kept, s.wantKept)
		}
		got, ok := m.Record(dep)
		if !ok || got.String() != s.set.String() || (got == nil) != (s.set == nil) {
			t.Errorf("step %d: Record = %v, %v; want %v, true", i, got, ok, s.set)
		}
	}
	m.Drop(key)
	if _, ok := m.Record(dep); ok {
		t.Error("a dropped workload's record is kept")
	}
	var off *Memory // not in dry-run
	if _, ok := off.Record(dep); ok {
		t.Error("a nil Memory holds a record")
	}
	off.Drop(key) // does not panic
}
