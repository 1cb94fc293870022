package controller

import (
	"testing"

	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
)

// TestAdopted: a workload adopted with its namespace has its record
// brought up to date, and restarts nothing; any other plan is kept.
func TestAdopted(t *testing.T) {
	rec := plan.Record{"ConfigMap/cfg": {All: true, Keys: map[string]string{"a": "2"}}}
	change := []plan.Change{{Ref: refs.Ref{Kind: refs.ConfigMap, Name: "cfg"}, Keys: []string{"a"}}}
	for _, tt := range []struct {
		in   plan.Plan
		want plan.Action
	}{
		{plan.Plan{Action: plan.Restart, Record: rec, Changes: change}, plan.Refresh},
		{plan.Plan{Action: plan.Refresh, Record: rec}, plan.Refresh},
		{plan.Plan{Action: plan.Adopt, Record: rec}, plan.Adopt},
		{plan.Plan{Action: plan.Forget}, plan.Forget},
		{plan.Plan{Action: plan.None}, plan.None},
	} {
		got := adopted(tt.in)
		if got.Action != tt.want || len(got.Changes) > 0 || (tt.in.Record != nil && got.Record.String() != rec.String()) {
			t.Errorf("adopted(%s) = %s %v %v, want %s with the record and no change", tt.in.Action, got.Action, got.Changes, got.Record, tt.want)
		}
	}
}

// TestSelection: a namespace is told of once selected, with its
// workloads to adopt, each taken once; dropped, it is no longer told of,
// and its adoptions are forgotten, also one that failed meanwhile; a nil
// selection (no selector) is told of every namespace and adopts nothing.
func TestSelection(t *testing.T) {
	s := newSelection()
	x, y := object.Ref{Kind: "Deployment", Namespace: "x", Name: "web"}, object.Ref{Kind: "Deployment", Namespace: "y", Name: "web"}
	if s.isTold("x") {
		t.Error("told of x before it was selected")
	}
	s.selected("x", []object.Ref{x})
	s.selected("y", []object.Ref{y})
	s.selected("z", nil) // initial list
	if !s.isTold("x") || !s.isTold("z") {
		t.Error("not told of x and z")
	}
	if !s.take(x) || s.take(x) {
		t.Error("want x taken once")
	}
	s.readopt(x)
	if !s.take(x) {
		t.Error("a failed adoption is not retried")
	}
	s.dropped("y")
	s.readopt(y)
	if s.isTold("y") || s.take(y) {
		t.Error("y dropped, but still told of or adopted")
	}
	var none *selection
	if !none.isTold("x") || none.take(x) {
		t.Error("a nil selection is not told of every namespace, or adopts")
	}
}
