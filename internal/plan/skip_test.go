package plan_test

import (
	"testing"

	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
)

// TestSkipReason: one case per row of SkipReason's table, each from a plan
// Decide made.
func TestSkipReason(t *testing.T) {
	rec := plan.Record{cmA: entry("x", "1", "y", "1")}
	cfg := func(c plan.Config) map[string]plan.Config { return map[string]plan.Config{cmA: c} }
	tests := []struct {
		name string
		in   plan.Input
		want string
	}{
		{"workload opted out", plan.Input{OptedOut: true, Refs: []refs.Ref{cm("a", "x")}, Recorded: rec, Configs: cfg(present("x", "2"))}, plan.SkipWorkloadOptedOut},
		{"a key read changed", plan.Input{Refs: []refs.Ref{cm("a", "x", "y")}, Recorded: rec, Configs: cfg(present("x", "2", "y", "1"))}, ""},
		{"required key gone", plan.Input{Refs: []refs.Ref{required("a", []string{"x", "y"}, "x")}, Recorded: rec, Configs: cfg(present("y", "2"))}, plan.SkipMissingKey},
		{"object opted out", plan.Input{Refs: []refs.Ref{cm("a", "x", "y")}, Recorded: rec, Configs: cfg(optedOut("x", "2", "y", "1"))}, plan.SkipConfigOptedOut},
		{"a key not read changed", plan.Input{Refs: []refs.Ref{cm("a", "x", "y")}, Recorded: rec, Configs: cfg(present("x", "1", "y", "1", "z", "2"))}, plan.SkipUnusedKeys},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := plan.Decide(tt.in).SkipReason(tt.in); got != tt.want {
				t.Errorf("SkipReason() = %q, want %q", got, tt.want)
			}
		})
	}
}
