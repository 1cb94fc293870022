package plan_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
)

// verdict is what a chain says of a reference: its verdict and the rule's
// name.
type verdict struct {
	V    plan.Verdict
	Rule string
}

// evaluate asks rules about the only reference of a workload with
// annotations, whose object is cfg.
func evaluate(rules plan.Chain, annotations map[string]string, cfg plan.Config) verdict {
	in := plan.Input{Rules: rules, Annotations: annotations, Refs: []refs.Ref{cmAll("a")}, Configs: map[string]plan.Config{cmA: cfg}}
	v, rule := in.Rules.Evaluate(in, in.Refs[0])
	return verdict{v, rule}
}

// TestNewChain: one case per row of NewChain's table.
func TestNewChain(t *testing.T) {
	tests := []struct {
		name     string
		workload map[string]string
		cfg      plan.Config
		want     verdict
	}{
		{"workload-opted-out", optedOutAnnotations, present("k", "1"), verdict{plan.Drop, plan.SkipWorkloadOptedOut}},
		{"auto-disabled", map[string]string{"reloader.stakater.com/auto": "false"}, present("k", "1"), verdict{plan.Drop, plan.SkipAutoDisabled}},
		// not-opted-in needs the annotated mode: see TestOptInRules.
		{"config-opted-out", nil, optedOut("k", "1"), verdict{plan.Ignore, plan.SkipConfigOptedOut}},
		{"config-ignored", nil, plan.Config{Present: true, Annotations: map[string]string{"reloader.stakater.com/ignore": "true"}}, verdict{plan.Ignore, plan.SkipConfigIgnored}},
		{"no rule matches: count", nil, present("k", "1"), verdict{plan.Count, ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := evaluate(rules, tt.workload, tt.cfg); got != tt.want {
				t.Errorf("Evaluate() = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestWorkloadOptedOut: the workload-opted-out rule reads the workload's
// annotation, and only its.
func TestWorkloadOptedOut(t *testing.T) {
	drop, count := verdict{plan.Drop, plan.SkipWorkloadOptedOut}, verdict{plan.Count, ""}
	tests := []struct {
		name     string
		workload map[string]string
		cfg      plan.Config
		want     verdict
	}{
		{"false", map[string]string{optOut: "false"}, present(), drop},
		{"0", map[string]string{optOut: "0"}, present(), drop},
		{"object missing", map[string]string{optOut: "false"}, missing, drop},
		{"true", map[string]string{optOut: "true"}, present(), count},
		{"absent", map[string]string{"other": "false"}, present(), count},
		{"malformed: does not opt out", map[string]string{optOut: "no"}, present(), count},
		{"a label is not the annotation", nil, plan.Config{Present: true, Labels: map[string]string{optOut: "false"}}, count},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := evaluate(rules, tt.workload, tt.cfg); got != tt.want {
				t.Errorf("Evaluate() = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestConfigOptedOut: the config-opted-out rule reads the object's
// annotation, and only its.
func TestConfigOptedOut(t *testing.T) {
	ignore, count := verdict{plan.Ignore, plan.SkipConfigOptedOut}, verdict{plan.Count, ""}
	annotated := func(v string) plan.Config {
		c := present("k", "1")
		c.Annotations = map[string]string{optOut: v}
		return c
	}
	tests := []struct {
		name     string
		workload map[string]string
		cfg      plan.Config
		want     verdict
	}{
		{"false", nil, annotated("false"), ignore},
		{"False", nil, annotated("False"), ignore},
		{"workload annotated true", map[string]string{optOut: "true"}, annotated("false"), ignore},
		{"true", nil, annotated("true"), count},
		{"malformed: does not opt out", nil, annotated("hunter2"), count},
		{"object missing", nil, missing, count},
		{"a label is not the annotation", nil, plan.Config{Present: true, Labels: map[string]string{optOut: "false"}}, count},
		{"another annotation key", nil, plan.Config{Present: true, Annotations: map[string]string{"other": "false"}}, count},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := evaluate(rules, tt.workload, tt.cfg); got != tt.want {
				t.Errorf("Evaluate() = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestNewChainOptions: the chain reads the annotation key it was built
// with, not a fixed one.
func TestNewChainOptions(t *testing.T) {
	custom := plan.NewChain(plan.Options{OptOutAnnotation: "example.com/restart"})
	if got := evaluate(custom, optedOutAnnotations, optedOut()); got != (verdict{plan.Count, ""}) {
		t.Errorf("other key: Evaluate() = %v, want count", got)
	}
	ann := map[string]string{"example.com/restart": "false"}
	if got := evaluate(custom, ann, present()); got != (verdict{plan.Drop, plan.SkipWorkloadOptedOut}) {
		t.Errorf("workload: Evaluate() = %v, want drop", got)
	}
	if got := evaluate(custom, nil, plan.Config{Present: true, Annotations: ann}); got != (verdict{plan.Ignore, plan.SkipConfigOptedOut}) {
		t.Errorf("object: Evaluate() = %v, want ignore", got)
	}
}

// TestChainOrder: the first rule that matches decides, whatever it says.
func TestChainOrder(t *testing.T) {
	always := func(plan.Input, refs.Ref, plan.Config) bool { return true }
	never := func(plan.Input, refs.Ref, plan.Config) bool { return false }
	tests := []struct {
		name     string
		rules    plan.Chain
		workload map[string]string
		cfg      plan.Config
		want     verdict
	}{
		{"no rules: count", nil, nil, present(), verdict{plan.Count, ""}},
		{"no rule matches: count", plan.Chain{{"a", plan.Drop, never}, {"b", plan.Ignore, never}}, nil, present(), verdict{plan.Count, ""}},
		{"first match wins", plan.Chain{{"a", plan.Ignore, always}, {"b", plan.Drop, always}}, nil, present(), verdict{plan.Ignore, "a"}},
		{"a rule that does not match passes", plan.Chain{{"a", plan.Ignore, never}, {"b", plan.Drop, always}}, nil, present(), verdict{plan.Drop, "b"}},
		{"count decides too: later rules are not asked", plan.Chain{{"listed", plan.Count, always}, {"b", plan.Drop, always}}, nil, present(), verdict{plan.Count, "listed"}},
		{"workload and object opted out: the workload rule comes first", rules, optedOutAnnotations, optedOut("k", "1"), verdict{plan.Drop, plan.SkipWorkloadOptedOut}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := evaluate(tt.rules, tt.workload, tt.cfg); got != tt.want {
				t.Errorf("Evaluate() = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestDecideVerdicts: Decide follows each verdict of a chain, per
// reference. A dropped reference is neither compared nor recorded; the
// others are decided as usual.
func TestDecideVerdicts(t *testing.T) {
	named := func(name string) func(plan.Input, refs.Ref, plan.Config) bool {
		return func(_ plan.Input, ref refs.Ref, _ plan.Config) bool { return ref.Name == name }
	}
	in := plan.Input{
		Rules: plan.Chain{
			{"keep-b", plan.Count, named("b")},
			{"drop-b", plan.Drop, named("b")},
			{"drop-c", plan.Drop, named("c")},
			{"ignore-a", plan.Ignore, named("a")},
		},
		Refs:     []refs.Ref{cmAll("a"), cmAll("b"), cmAll("c"), secAll("a")},
		Recorded: plan.Record{cmA: all("k", "1"), cmB: all("k", "1"), "ConfigMap/c": all("k", "1"), secA: all("k", "1")},
		Configs: map[string]plan.Config{
			cmA: present("k", "2"), cmB: present("k", "2"), "ConfigMap/c": present("k", "2"), secA: present("k", "2"),
		},
	}
	// The rule "ignore-a" matches both ConfigMap a and Secret a (the same
	// name): both are ignored, ConfigMap b counts, ConfigMap c is dropped.
	want := plan.Plan{
		Action: plan.Restart,
		Record: plan.Record{cmA: all("k", "2"), cmB: all("k", "2"), secA: all("k", "2")},
		Changes: []plan.Change{
			change(cmAll("b"), []string{"k"}, all("k", "1"), all("k", "2")),
		},
		Ignored: []plan.Change{
			change(cmAll("a"), []string{"k"}, all("k", "1"), all("k", "2")),
			change(secAll("a"), []string{"k"}, all("k", "1"), all("k", "2")),
		},
	}
	if diff := cmp.Diff(want, plan.Decide(in)); diff != "" {
		t.Errorf("Decide() mismatch (-want +got):\n%s", diff)
	}
}

func TestVerdictString(t *testing.T) {
	want := map[plan.Verdict]string{plan.Count: "count", plan.Ignore: "ignore", plan.Drop: "drop"}
	for v, s := range want {
		if v.String() != s {
			t.Errorf("Verdict(%d).String() = %q, want %q", v, v.String(), s)
		}
	}
}

func TestOptedOut(t *testing.T) {
	const key = "require-restart"
	tests := []struct {
		name        string
		annotations map[string]string
		want        bool
		wantErr     bool
	}{
		{"nil annotations", nil, false, false},
		{"absent", map[string]string{"other": "false"}, false, false},
		{"false", map[string]string{key: "false"}, true, false},
		{"False", map[string]string{key: "False"}, true, false},
		{"FALSE", map[string]string{key: "FALSE"}, true, false},
		{"0", map[string]string{key: "0"}, true, false},
		{"f", map[string]string{key: "f"}, true, false},
		{"true", map[string]string{key: "true"}, false, false},
		{"True", map[string]string{key: "True"}, false, false},
		{"1", map[string]string{key: "1"}, false, false},
		{"garbage", map[string]string{key: "hunter2"}, false, true},
		{"empty", map[string]string{key: ""}, false, true},
		{"padded", map[string]string{key: " false"}, false, true},
		{"no", map[string]string{key: "no"}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := plan.OptedOut(tt.annotations, key)
			if got != tt.want {
				t.Errorf("OptedOut(%v) = %v, want %v", tt.annotations, got, tt.want)
			}
			if (err != nil) != tt.wantErr {
				t.Fatalf("OptedOut(%v) error = %v, want error: %v", tt.annotations, err, tt.wantErr)
			}
			if err == nil {
				return
			}
			if !strings.Contains(err.Error(), key) {
				t.Errorf("error %q does not name the annotation %s", err, key)
			}
			// On a Secret the value could be anything: it is not quoted.
			if v := tt.annotations[key]; strings.Contains(err.Error(), strconv.Quote(v)) {
				t.Errorf("error %q quotes the annotation value", err)
			}
		})
	}
}

// TestControlled: a Job with a controller (Input.Controlled) is dropped
// whatever it opts in to, before every other rule: a restart decided for
// it would delete and re-create its controller's run. With a record, its
// record is removed (Forget) and nothing restarts; without, nothing.
func TestControlled(t *testing.T) {
	optIn := map[string]string{"reloader.stakater.com/auto": "true", "configmap.reloader.stakater.com/reload": "a"}
	for _, tt := range []struct {
		name       string
		controlled bool
		recorded   bool
		want       plan.Action
	}{
		{"controlled, recorded: forget", true, true, plan.Forget},
		{"controlled, never recorded: nothing", true, false, plan.None},
		{"not controlled, recorded: restart", false, true, plan.Restart},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := plan.Input{Rules: rules, Annotations: optIn, OptInOnly: true, Controlled: tt.controlled,
				Refs: []refs.Ref{cmAll("a")}, Configs: map[string]plan.Config{cmA: present("k", "2")}}
			if tt.recorded {
				in.Recorded = plan.Decide(plan.Input{Refs: in.Refs, Configs: map[string]plan.Config{cmA: present("k", "1")}}).Record
			}
			p := plan.Decide(in)
			if p.Action != tt.want {
				t.Errorf("Decide() = %v, want %v", p.Action, tt.want)
			}
			if v, rule := in.Rules.Evaluate(in, in.Refs[0]); tt.controlled && (v != plan.Drop || rule != plan.SkipControlled) {
				t.Errorf("Evaluate() = %v %q, want drop %q", v, rule, plan.SkipControlled)
			}
		})
	}
}
