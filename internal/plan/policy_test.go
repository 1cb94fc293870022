package plan_test

import (
	"testing"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
)

// TestPolicyRule: a reference that a ReloadPolicy applying to the workload
// names (Input.Policies) counts in the annotated mode and despite auto
// "false"; the stronger opt-outs (the workload's opt-out annotation, an
// exclude list) and the object's own ignore still win; a policy naming
// another object opts nothing in.
func TestPolicyRule(t *testing.T) {
	count := verdict{plan.Count, ""}
	cm := cmAll("shared")
	named := map[string]bool{cm.ID(): true}
	other := map[string]bool{"ConfigMap/other": true}
	ignored := present("k", "1")
	ignored.Annotations = map[string]string{optin.Ignore: "true"}
	tests := []struct {
		name           string
		workload       map[string]string
		policies       map[string]bool
		cfg            plan.Config
		all, annotated verdict
	}{
		{"no policy", nil, nil, present("k", "1"), count, verdict{plan.Drop, plan.SkipNotOptedIn}},
		{"a policy names it: a target opts in", nil, named, present("k", "1"), count, count},
		{"a policy names another object", nil, other, present("k", "1"), count, verdict{plan.Drop, plan.SkipNotOptedIn}},
		{"auto false: the policy still counts", map[string]string{optin.ReloaderAuto: "false"}, named, present("k", "1"), count, count},
		{"the workload opts out: it wins", map[string]string{optOut: "false"}, named, present("k", "1"), verdict{plan.Drop, plan.SkipWorkloadOptedOut}, verdict{plan.Drop, plan.SkipWorkloadOptedOut}},
		{"an exclude list names it: it wins", map[string]string{optin.ConfigMapExclude: "shared"}, named, present("k", "1"), verdict{plan.Drop, plan.SkipExcluded}, verdict{plan.Drop, plan.SkipExcluded}},
		{"the object is ignored: it wins", nil, named, ignored, verdict{plan.Ignore, plan.SkipConfigIgnored}, verdict{plan.Ignore, plan.SkipConfigIgnored}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, mode := range []struct {
				rules plan.Chain
				want  verdict
			}{{allRules, tt.all}, {annotatedRules, tt.annotated}} {
				in := plan.Input{Rules: mode.rules, Annotations: tt.workload, Policies: tt.policies, Refs: []refs.Ref{cm}, Configs: map[string]plan.Config{cm.ID(): tt.cfg}}
				v, rule := in.Rules.Evaluate(in, cm)
				if got := (verdict{v, rule}); got != mode.want {
					t.Errorf("%v, want %v", got, mode.want)
				}
			}
		})
	}
}
