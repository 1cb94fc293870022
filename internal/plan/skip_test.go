package plan_test

import (
	"testing"

	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
)

func TestTriage(t *testing.T) {
	uses := []refs.Ref{cm("a", "x", "y"), cmAll("b"), secAll("a")}
	tests := []struct {
		name     string
		optedOut bool
		uses     []refs.Ref
		id       string
		changed  []string
		want     string
	}{
		// One case per row of the table in Triage's comment.
		{"workload opted out, reads a changed key", true, uses, cmA, []string{"x"}, plan.SkipWorkloadOptedOut},
		{"workload opted out, reads no changed key", true, uses, cmA, []string{"z"}, plan.SkipWorkloadOptedOut},
		{"reads no changed key", false, uses, cmA, []string{"w", "z"}, plan.SkipUnusedKeys},
		{"reads a changed key", false, uses, cmA, []string{"z", "y"}, ""},

		// Edge cases.
		{"all keys: any changed key is read", false, uses, cmB, []string{"anything"}, ""},
		{"Secret of the same name as a ConfigMap: all keys", false, uses, secA, []string{"z"}, ""},
		{"uses a different object only", false, []refs.Ref{cmAll("b")}, cmA, []string{"x"}, plan.SkipUnusedKeys},
		{"Secret with the name of a ConfigMap used", false, []refs.Ref{cmAll("a")}, secA, []string{"x"}, plan.SkipUnusedKeys},
		{"no references", false, nil, cmA, []string{"x"}, plan.SkipUnusedKeys},
		{"no changed keys", false, uses, cmB, nil, plan.SkipUnusedKeys},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := plan.Triage(tt.optedOut, tt.uses, tt.id, tt.changed); got != tt.want {
				t.Errorf("Triage(%v, %v, %q, %v) = %q, want %q", tt.optedOut, tt.uses, tt.id, tt.changed, got, tt.want)
			}
		})
	}
}

// TestTriageAgreesWithDecide checks that Triage lets through exactly the
// changes after which Decide restarts.
func TestTriageAgreesWithDecide(t *testing.T) {
	ref := cm("a", "x", "y")
	old := map[string]string{"x": "1", "y": "1", "z": "1"}
	for _, changed := range [][]string{{"x"}, {"y"}, {"z"}, {"x", "z"}} {
		cur := map[string]string{}
		for k, v := range old {
			cur[k] = v
		}
		for _, k := range changed {
			cur[k] = "2"
		}
		p := plan.Decide(plan.Input{
			Refs:     []refs.Ref{ref},
			Recorded: plan.Record{cmA: entry("x", "1", "y", "1")},
			Configs:  map[string]plan.Config{cmA: {Present: true, Keys: cur}},
		})
		mayRestart := plan.Triage(false, []refs.Ref{ref}, cmA, changed) == ""
		if restarts := p.Action == plan.Restart; restarts != mayRestart {
			t.Errorf("changed %v: Decide restarts %v, Triage lets through %v", changed, restarts, mayRestart)
		}
	}
}
