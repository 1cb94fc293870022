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
		{"workload opted out", plan.Input{Annotations: optedOutAnnotations, Refs: []refs.Ref{cm("a", "x")}, Recorded: rec, Configs: cfg(present("x", "2"))}, plan.SkipWorkloadOptedOut},
		{"a key read changed", plan.Input{Refs: []refs.Ref{cm("a", "x", "y")}, Recorded: rec, Configs: cfg(present("x", "2", "y", "1"))}, ""},
		{"required key gone", plan.Input{Refs: []refs.Ref{required("a", []string{"x", "y"}, "x")}, Recorded: rec, Configs: cfg(present("y", "2"))}, plan.SkipMissingKey},
		{"object opted out", plan.Input{Refs: []refs.Ref{cm("a", "x", "y")}, Recorded: rec, Configs: cfg(optedOut("x", "2", "y", "1"))}, plan.SkipConfigOptedOut},
		{"a key not read changed", plan.Input{Refs: []refs.Ref{cm("a", "x", "y")}, Recorded: rec, Configs: cfg(present("x", "1", "y", "1", "z", "2"))}, plan.SkipUnusedKeys},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.Rules = rules
			if got := plan.Decide(in).SkipReason(in); got != tt.want {
				t.Errorf("SkipReason() = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestSkipReasonFromChain: the reasons are the names of the rules that
// decided, whatever the rules are; a rule that says count gives no reason.
func TestSkipReasonFromChain(t *testing.T) {
	rec := plan.Record{cmA: entry("x", "1"), cmB: entry("x", "1")}
	named := func(name string) func(plan.Input, refs.Ref, plan.Config) bool {
		return func(_ plan.Input, ref refs.Ref, _ plan.Config) bool { return ref.Name == name }
	}
	both := func(a, b plan.Config) map[string]plan.Config { return map[string]plan.Config{cmA: a, cmB: b} }
	uses := []refs.Ref{cm("a", "x"), cm("b", "x")}
	tests := []struct {
		name  string
		rules plan.Chain
		cfgs  map[string]plan.Config
		want  string
	}{
		{"every reference dropped", plan.Chain{{"not-listed", plan.Drop, named("a")}, {"not-listed", plan.Drop, named("b")}}, both(present("x", "2"), present("x", "2")), "not-listed"},
		{"a change ignored", plan.Chain{{"config-ignored", plan.Ignore, named("a")}}, both(present("x", "2"), present("x", "1")), "config-ignored"},
		{"a reference dropped, another changed: restart", plan.Chain{{"not-listed", plan.Drop, named("a")}}, both(present("x", "2"), present("x", "2")), ""},
		{"a rule said count", plan.Chain{{"listed", plan.Count, named("a")}}, both(present("x", "1", "y", "2"), present("x", "1")), plan.SkipUnusedKeys},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := plan.Input{Rules: tt.rules, Refs: uses, Recorded: rec, Configs: tt.cfgs}
			if got := plan.Decide(in).SkipReason(in); got != tt.want {
				t.Errorf("SkipReason() = %q, want %q", got, tt.want)
			}
		})
	}
}
