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

// TestAdoptions: an adoption is taken once; a namespace dropped forgets
// its own only; a nil set holds nothing.
func TestAdoptions(t *testing.T) {
	a := newAdoptions()
	x, y := object.Ref{Kind: "Deployment", Namespace: "x", Name: "web"}, object.Ref{Kind: "Deployment", Namespace: "y", Name: "web"}
	a.add(x)
	a.add(y)
	a.drop("y")
	if !a.take(x) || a.take(x) || a.take(y) {
		t.Error("want x taken once, y dropped")
	}
	var none *adoptions
	none.add(x)
	none.drop("x")
	if none.take(x) {
		t.Error("a nil set took an adoption")
	}
}
