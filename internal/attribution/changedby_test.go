package attribution

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/object"
)

// written returns a cached object whose content was written by managers
// at the given Unix seconds.
func written(ws map[string]int64) client.Object {
	var list []Writer
	for m, at := range ws {
		list = append(list, Writer{Manager: m, Time: time.Unix(at, 0)})
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetAnnotations(map[string]string{Annotation: Encode(list)})
	return obj
}

// TestChangedBy: who changed an object is the union of the authors of its
// changes until it is handled; an entry older than changedByTTL starts
// afresh; a handled change is forgotten.
func TestChangedBy(t *testing.T) {
	db := object.Ref{Kind: "Secret", Namespace: "ns", Name: "db"}
	type step struct {
		old, cur map[string]int64 // nil old: a creation
		after    time.Duration    // clock moved before this step
		forget   bool
	}
	for _, tt := range []struct {
		name  string
		steps []step
		want  []string
	}{
		{"created", []step{{cur: map[string]int64{"helm": 10}}}, []string{"helm"}},
		{"one update", []step{{old: map[string]int64{"helm": 10}, cur: map[string]int64{"helm": 10, "kubectl-edit": 12}}}, []string{"kubectl-edit"}},
		{"a burst by two", []step{
			{old: map[string]int64{"helm": 10}, cur: map[string]int64{"helm": 10, "kubectl-edit": 12}},
			{old: map[string]int64{"helm": 10, "kubectl-edit": 12}, cur: map[string]int64{"helm": 13, "kubectl-edit": 12}},
		}, []string{"helm", "kubectl-edit"}},
		{"handled, then changed again", []step{
			{old: map[string]int64{"helm": 10}, cur: map[string]int64{"kubectl-edit": 12}},
			{forget: true},
			{old: map[string]int64{"kubectl-edit": 12}, cur: map[string]int64{"external-secrets": 14}},
		}, []string{"external-secrets"}},
		{"an old entry starts afresh", []step{
			{old: map[string]int64{"helm": 10}, cur: map[string]int64{"kubectl-edit": 12}},
			{old: map[string]int64{"kubectl-edit": 12}, cur: map[string]int64{"helm": 900}, after: changedByTTL + time.Second},
		}, []string{"helm"}},
		{"nobody known", []step{{old: map[string]int64{}, cur: map[string]int64{}}}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			c := NewChangedBy()
			c.now = func() time.Time { return now }
			for _, s := range tt.steps {
				now = now.Add(s.after)
				if s.forget {
					c.Forget(db)
					continue
				}
				var old client.Object
				if s.old != nil {
					old = written(s.old)
				}
				c.Add(db, old, written(s.cur))
			}
			if got := c.Managers(db); !cmp.Equal(got, tt.want) {
				t.Errorf("Managers() = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestChangedByBounded: past maxChangedBy objects with changes pending
// (a standby handles none), the map does not grow.
func TestChangedByBounded(t *testing.T) {
	c := NewChangedBy()
	for i := range 3 * maxChangedBy {
		c.Add(object.Ref{Kind: "Secret", Namespace: "ns", Name: string(rune('a'+i%26)) + time.Duration(i).String()}, nil, written(map[string]int64{"helm": 10}))
	}
	if n := len(c.m); n > maxChangedBy {
		t.Errorf("%d entries, want at most %d", n, maxChangedBy)
	}
}
