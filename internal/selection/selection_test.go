package selection

import (
	"slices"
	"testing"

	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
)

// TestAdopted: a workload adopted with its namespace, which came to
// match at resourceVersion 100, has its record brought up to date; a
// change of an object written before the match restarts nothing, one
// written after restarts, alone; a version that cannot be compared is
// taken for one before; any other plan is kept.
func TestAdopted(t *testing.T) {
	rec := plan.Record{"ConfigMap/a": {All: true, Keys: map[string]string{"k": "2"}}}
	change := func(names ...string) []plan.Change {
		var out []plan.Change
		for _, n := range names {
			out = append(out, plan.Change{Ref: refs.Ref{Kind: refs.ConfigMap, Name: n}, Keys: []string{"k"}})
		}
		return out
	}
	configs := map[string]plan.Config{
		"ConfigMap/before": {Present: true, Version: "99"},
		"ConfigMap/at":     {Present: true, Version: "100"},
		"ConfigMap/after":  {Present: true, Version: "101"},
		"ConfigMap/later":  {Present: true, Version: "2000"},
		"ConfigMap/opaque": {Present: true, Version: "x7"},
		"ConfigMap/gone":   {},
	}
	for _, tt := range []struct {
		name        string
		in          plan.Plan
		since       string
		want        plan.Action
		wantChanges []string
	}{
		{"before", plan.Plan{Action: plan.Restart, Record: rec, Changes: change("before", "at")}, "100", plan.Refresh, nil},
		{"after", plan.Plan{Action: plan.Restart, Record: rec, Changes: change("after")}, "100", plan.Restart, []string{"after"}},
		{"both", plan.Plan{Action: plan.Restart, Record: rec, Changes: change("after", "before", "later")}, "100", plan.Restart, []string{"after", "later"}},
		{"unknown", plan.Plan{Action: plan.Restart, Record: rec, Changes: change("opaque", "gone")}, "100", plan.Refresh, nil},
		{"no version of the match", plan.Plan{Action: plan.Restart, Record: rec, Changes: change("after")}, "", plan.Refresh, nil},
		{"refresh", plan.Plan{Action: plan.Refresh, Record: rec}, "100", plan.Refresh, nil},
		{"adopt", plan.Plan{Action: plan.Adopt, Record: rec}, "100", plan.Adopt, nil},
		{"forget", plan.Plan{Action: plan.Forget}, "100", plan.Forget, nil},
		{"none", plan.Plan{Action: plan.None}, "100", plan.None, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Adopted(tt.in, configs, tt.since)
			var names []string
			for _, c := range got.Changes {
				names = append(names, c.Ref.Name)
			}
			if got.Action != tt.want || !slices.Equal(names, tt.wantChanges) || (tt.in.Record != nil && got.Record.String() != rec.String()) {
				t.Errorf("adopted = %s %v %v, want %s %v with the record", got.Action, names, got.Record, tt.want, tt.wantChanges)
			}
		})
	}
}

// TestSelection: a namespace is told of once selected, with its
// workloads to adopt, each taken once; dropped, it is no longer told of,
// and its adoptions are forgotten, also one that failed meanwhile; a nil
// Namespaces (no selector) is told of every namespace and adopts nothing.
func TestSelection(t *testing.T) {
	s := New()
	x, y := object.Ref{Kind: "Deployment", Namespace: "x", Name: "web"}, object.Ref{Kind: "Deployment", Namespace: "y", Name: "web"}
	if s.IsTold("x") {
		t.Error("told of x before it was selected")
	}
	s.Selected("x", "10", []object.Ref{x})
	s.Selected("y", "11", []object.Ref{y})
	s.Selected("z", "", nil) // initial list
	if !s.IsTold("x") || !s.IsTold("z") {
		t.Error("not told of x and z")
	}
	if since, ok := s.Take(x); !ok || since != "10" {
		t.Errorf("x taken: %v since %q, want true since 10", ok, since)
	}
	if _, ok := s.Take(x); ok {
		t.Error("x taken twice")
	}
	s.Readopt(x, "10")
	if since, ok := s.Take(x); !ok || since != "10" {
		t.Error("a failed adoption is not retried with its version")
	}
	s.Dropped("y")
	s.Readopt(y, "11")
	if _, ok := s.Take(y); s.IsTold("y") || ok {
		t.Error("y dropped, but still told of or adopted")
	}
	var none *Namespaces
	if _, ok := none.Take(x); !none.IsTold("x") || ok {
		t.Error("a nil selection is not told of every namespace, or adopts")
	}
}
