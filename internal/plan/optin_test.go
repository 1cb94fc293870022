package plan_test

import (
	"testing"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
)

// evaluateRef asks rules about ref, one reference of a workload with
// annotations, whose object is cfg.
func evaluateRef(rules plan.Chain, annotations map[string]string, ref refs.Ref, cfg plan.Config) verdict {
	in := plan.Input{Rules: rules, Annotations: annotations, Refs: []refs.Ref{ref}, Configs: map[string]plan.Config{ref.ID(): cfg}}
	v, rule := in.Rules.Evaluate(in, ref)
	return verdict{v, rule}
}

var (
	annotatedRules = plan.NewChain(plan.Options{OptOutAnnotation: optOut, Discovery: plan.DiscoveryAnnotated})
	allRules       = plan.NewChain(plan.Options{OptOutAnnotation: optOut, Discovery: plan.DiscoveryAll})
)

// TestOptInRules: the rules auto-disabled and not-opted-in, in both
// discovery modes, with the cases of Reloader's documentation (a workload
// annotated so, and a ConfigMap or Secret "foo-configmap"/"foo-secret" its
// pod spec uses or not).
func TestOptInRules(t *testing.T) {
	count := verdict{plan.Count, ""}
	disabled := verdict{plan.Drop, plan.SkipAutoDisabled}
	notIn := verdict{plan.Drop, plan.SkipNotOptedIn}
	cm, sec := cmAll("foo-configmap"), secAll("foo-secret")
	tests := []struct {
		name           string
		workload       map[string]string
		ref            refs.Ref
		all, annotated verdict
	}{
		{"no annotation", nil, cm, count, notIn},
		{"reloader.stakater.com/auto: true, a ConfigMap", map[string]string{optin.ReloaderAuto: "true"}, cm, count, count},
		{"reloader.stakater.com/auto: true, a Secret", map[string]string{optin.ReloaderAuto: "true"}, sec, count, count},
		{"watcher.dev/auto: true", map[string]string{optin.Auto: "true"}, sec, count, count},
		{"configmap.reloader.stakater.com/auto: true, a ConfigMap", map[string]string{optin.ConfigMapAuto: "true"}, cm, count, count},
		{"configmap.reloader.stakater.com/auto: true, a Secret", map[string]string{optin.ConfigMapAuto: "true"}, sec, count, notIn},
		{"secret.reloader.stakater.com/auto: true, a Secret", map[string]string{optin.SecretAuto: "true"}, sec, count, count},
		{"secret.reloader.stakater.com/auto: true, a ConfigMap", map[string]string{optin.SecretAuto: "true"}, cm, count, notIn},
		{"reloader.stakater.com/auto: false", map[string]string{optin.ReloaderAuto: "false"}, cm, disabled, disabled},
		{"watcher.dev/auto: false", map[string]string{optin.Auto: "false"}, sec, disabled, disabled},
		{"secret.reloader.stakater.com/auto: false, a ConfigMap", map[string]string{optin.SecretAuto: "false"}, cm, count, notIn},
		{"auto malformed: absent", map[string]string{optin.ReloaderAuto: "nope"}, cm, count, notIn},
		{"configmap reload: foo-configmap", map[string]string{optin.ConfigMapReload: "foo-configmap"}, cm, count, count},
		{"configmap reload: a list", map[string]string{optin.ConfigMapReload: "foo-configmap,bar-configmap,baz-configmap"}, cm, count, count},
		{"configmap reload: another name", map[string]string{optin.ConfigMapReload: "bar-configmap"}, cm, count, notIn},
		{"configmap reload: a pattern", map[string]string{optin.ConfigMapReload: "foo-.*"}, cm, count, count},
		{"configmap reload names no Secret", map[string]string{optin.ConfigMapReload: "foo-secret"}, sec, count, notIn},
		{"secret reload: foo-secret", map[string]string{optin.SecretReload: "foo-secret"}, sec, count, count},
		{"auto false and a reload list naming it: counts, as in Reloader", map[string]string{optin.ReloaderAuto: "false", optin.ConfigMapReload: "foo-configmap"}, cm, count, count},
		{"auto false and a reload list naming another", map[string]string{optin.ReloaderAuto: "false", optin.ConfigMapReload: "other"}, cm, disabled, disabled},
		{"reload list with an invalid entry: the others apply", map[string]string{optin.ConfigMapReload: "(bad,foo-configmap"}, cm, count, count},
		{"opt-out annotation wins over auto true", map[string]string{optOut: "false", optin.ReloaderAuto: "true"}, cm, verdict{plan.Drop, plan.SkipWorkloadOptedOut}, verdict{plan.Drop, plan.SkipWorkloadOptedOut}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := evaluateRef(allRules, tt.workload, tt.ref, present("k", "1")); got != tt.all {
				t.Errorf("discovery all: %v, want %v", got, tt.all)
			}
			if got := evaluateRef(annotatedRules, tt.workload, tt.ref, present("k", "1")); got != tt.annotated {
				t.Errorf("discovery annotated: %v, want %v", got, tt.annotated)
			}
			// An opt-in-only workload (a Job) is decided as in the
			// annotated mode, in either mode.
			for mode, rules := range map[string]plan.Chain{"all": allRules, "annotated": annotatedRules} {
				in := plan.Input{Rules: rules, Annotations: tt.workload, OptInOnly: true, Refs: []refs.Ref{tt.ref},
					Configs: map[string]plan.Config{tt.ref.ID(): present("k", "1")}}
				if v, rule := in.Rules.Evaluate(in, tt.ref); (verdict{v, rule}) != tt.annotated {
					t.Errorf("opt-in only, discovery %s: %v, want %v", mode, verdict{v, rule}, tt.annotated)
				}
			}
		})
	}
	// The default mode is all.
	if got := evaluateRef(rules, nil, cm, present()); got != count {
		t.Errorf("no Discovery: %v, want count", got)
	}
}

// TestConfigIgnored: reloader.stakater.com/ignore on the ConfigMap or
// Secret, and only there.
func TestConfigIgnored(t *testing.T) {
	ignore, count := verdict{plan.Ignore, plan.SkipConfigIgnored}, verdict{plan.Count, ""}
	on := func(v string) plan.Config {
		c := present("k", "1")
		c.Annotations = map[string]string{optin.Ignore: v}
		return c
	}
	auto := map[string]string{optin.ReloaderAuto: "true"}
	tests := []struct {
		name     string
		rules    plan.Chain
		workload map[string]string
		cfg      plan.Config
		want     verdict
	}{
		{"true", allRules, nil, on("true"), ignore},
		{"true, annotated mode, opted-in workload", annotatedRules, auto, on("true"), ignore},
		{"false", allRules, nil, on("false"), count},
		{"malformed", allRules, nil, on("yes"), count},
		{"on the workload: nothing", allRules, map[string]string{optin.Ignore: "true"}, present("k", "1"), count},
		{"object missing", allRules, nil, missing, count},
		{"opted out too: config-opted-out first", allRules, nil, plan.Config{Present: true, Annotations: map[string]string{optin.Ignore: "true", optOut: "false"}}, verdict{plan.Ignore, plan.SkipConfigOptedOut}},
		{"workload not opted in: dropped first", annotatedRules, nil, on("true"), verdict{plan.Drop, plan.SkipNotOptedIn}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := evaluateRef(tt.rules, tt.workload, cmAll("a"), tt.cfg); got != tt.want {
				t.Errorf("Evaluate() = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestAnnotatedDiscoveryWritesNothing: in the annotated mode a workload that
// does not opt in is never written, and its record, if any, is removed.
func TestAnnotatedDiscoveryWritesNothing(t *testing.T) {
	in := plan.Input{Rules: annotatedRules, Refs: []refs.Ref{cmAll("a")}, Configs: map[string]plan.Config{cmA: present("k", "2")}}
	if p := plan.Decide(in); p.Action != plan.None {
		t.Errorf("new workload: %v, want none", p.Action)
	}
	in.Recorded = plan.Record{cmA: all("k", "1")}
	if p := plan.Decide(in); p.Action != plan.Forget {
		t.Errorf("recorded workload: %v, want forget", p.Action)
	}
	in.Annotations = map[string]string{optin.Auto: "true"}
	if p := plan.Decide(in); p.Action != plan.Restart {
		t.Errorf("opted in: %v, want restart", p.Action)
	}
	if p := plan.Decide(in); p.SkipReason(in) != "" {
		t.Errorf("opted in: skip reason %q", p.SkipReason(in))
	}
	in.Annotations = nil
	if p := plan.Decide(in); p.SkipReason(in) != plan.SkipNotOptedIn {
		t.Errorf("skip reason %q, want %s", p.SkipReason(in), plan.SkipNotOptedIn)
	}
}

// TestExcludeAndSearch: the rules excluded, and search/match as a way of
// opting in, with the cases of Reloader's documentation: exclude lists win
// over every way of opting in; search/match counts in both modes and
// against auto "false".
func TestExcludeAndSearch(t *testing.T) {
	count := verdict{plan.Count, ""}
	excluded := verdict{plan.Drop, plan.SkipExcluded}
	disabled := verdict{plan.Drop, plan.SkipAutoDisabled}
	notIn := verdict{plan.Drop, plan.SkipNotOptedIn}
	cm := cmAll("foo-configmap")
	matched := present("k", "1")
	matched.Annotations = map[string]string{optin.Match: "true"}
	tests := []struct {
		name           string
		workload       map[string]string
		cfg            plan.Config
		all, annotated verdict
	}{
		{"auto true, excluded", map[string]string{optin.ReloaderAuto: "true", optin.ConfigMapExclude: "foo-configmap"}, present("k", "1"), excluded, excluded},
		{"reload list names it, excluded", map[string]string{optin.ConfigMapReload: "foo-configmap", optin.ConfigMapExclude: "foo-configmap"}, present("k", "1"), excluded, excluded},
		{"excluded among others", map[string]string{optin.ConfigMapExclude: "a, foo-configmap ,b"}, present("k", "1"), excluded, excluded},
		{"a Secret exclude list does not exclude a ConfigMap", map[string]string{optin.ReloaderAuto: "true", optin.SecretExclude: "foo-configmap"}, present("k", "1"), count, count},
		{"search, object matches", map[string]string{optin.Search: "true"}, matched, count, count},
		{"search, object does not match", map[string]string{optin.Search: "true"}, present("k", "1"), count, notIn},
		{"match without search", nil, matched, count, notIn},
		{"auto false, search and match: counts", map[string]string{optin.ReloaderAuto: "false", optin.Search: "true"}, matched, count, count},
		{"auto false, search, no match", map[string]string{optin.ReloaderAuto: "false", optin.Search: "true"}, present("k", "1"), disabled, disabled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := evaluateRef(allRules, tt.workload, cm, tt.cfg); got != tt.all {
				t.Errorf("discovery all: %v, want %v", got, tt.all)
			}
			if got := evaluateRef(annotatedRules, tt.workload, cm, tt.cfg); got != tt.annotated {
				t.Errorf("discovery annotated: %v, want %v", got, tt.annotated)
			}
		})
	}
}

// TestOptInOnlyWritesNothing: a workload that is opt-in only (a Job) and
// does not opt in is never written under discovery all either; opted in,
// it restarts.
func TestOptInOnlyWritesNothing(t *testing.T) {
	in := plan.Input{Rules: allRules, OptInOnly: true, Refs: []refs.Ref{cmAll("a")}, Configs: map[string]plan.Config{cmA: present("k", "2")}}
	if p := plan.Decide(in); p.Action != plan.None {
		t.Errorf("new workload: %v, want none", p.Action)
	}
	in.Recorded = plan.Record{cmA: all("k", "1")}
	if p := plan.Decide(in); p.Action != plan.Forget {
		t.Errorf("recorded workload: %v, want forget", p.Action)
	}
	in.Annotations = map[string]string{optin.ReloaderAuto: "true"}
	if p := plan.Decide(in); p.Action != plan.Restart {
		t.Errorf("opted in: %v, want restart", p.Action)
	}
}
