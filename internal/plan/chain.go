package plan

import (
	"fmt"
	"strconv"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/refs"
)

// Verdict is what a rule says of one reference of a workload.
type Verdict int

// The verdicts. Count is the zero value: a reference no rule matches counts.
const (
	// Count: the reference's changes restart the workload, whatever later
	// rules would say.
	Count Verdict = iota
	// Ignore: its changes are recorded silently; they restart nothing and
	// are listed in Plan.Ignored.
	Ignore
	// Drop: the reference is left out, as if the pod template did not use
	// it: neither compared nor recorded. A workload whose every reference
	// is dropped is treated as one that uses nothing: its record is removed.
	Drop
)

var verdictNames = [...]string{"count", "ignore", "drop"}

func (v Verdict) String() string { return verdictNames[v] }

// Rule is one link of a Chain.
type Rule struct {
	// Name says why a reference did not count, in logs and in the reason
	// label of watcher_skipped_changes_total (see Plan.SkipReason).
	Name string
	// Verdict is what the rule says of a reference it matches.
	Verdict Verdict
	// Match tells whether the rule applies to ref, one of in.Refs, whose
	// object is cfg (the zero Config when it does not exist).
	Match func(in Input, ref refs.Ref, cfg Config) bool
}

// Chain is an ordered list of rules deciding, for a workload and each of its
// references, whether the reference's changes count. The first rule that
// matches decides; later rules are not asked. Decide runs the chain before
// it compares anything; a required key missing, and the comparison itself,
// are Decide's own.
type Chain []Rule

// Evaluate returns the verdict of the first rule of c that matches ref, one
// of in.Refs, and that rule's name; Count and "" when none does.
func (c Chain) Evaluate(in Input, ref refs.Ref) (Verdict, string) {
	cfg := in.Configs[ref.ID()]
	for _, r := range c {
		if r.Match(in, ref, cfg) {
			return r.Verdict, r.Name
		}
	}
	return Count, ""
}

// The discovery modes: which workloads' references count.
const (
	// DiscoveryAll: every workload's (today's behaviour).
	DiscoveryAll = "all"
	// DiscoveryAnnotated: only those of workloads that opt in (optin.AutoFor,
	// or a reload list naming the object), as in Reloader.
	DiscoveryAnnotated = "annotated"
)

// Options are the settings the chain is built from.
type Options struct {
	// OptOutAnnotation is the key of the annotation by which a workload, a
	// ConfigMap or a Secret opts out, with the value "false" (see OptedOut).
	OptOutAnnotation string
	// Discovery is DiscoveryAll (also when empty) or DiscoveryAnnotated.
	Discovery string
}

// NewChain returns watcher's rules, in the order they are asked:
//
//	rule                 verdict  matches when
//	controlled           drop     the workload is opt-in only and has a
//	                              controller (Input.Controlled: a CronJob's
//	                              Job, whatever its template inherited)
//	workload-opted-out   drop     the workload's OptOutAnnotation is false
//	excluded             drop     an exclude list of the workload names the
//	                              object (optin.Excluded)
//	auto-disabled        drop     the workload's auto annotations are off for
//	                              the reference's kind (optin.AutoFor), no
//	                              reload list of the workload names it, it
//	                              is not found by search/match
//	                              (optin.Searched), and no ReloadPolicy
//	                              applying to the workload names it
//	                              (Input.Policies)
//	not-opted-in         drop     Discovery is annotated (or the workload is
//	                              opt-in only: Input.OptInOnly, a Job), the
//	                              auto annotations are not on for the
//	                              reference's kind, no
//	                              reload list of the workload names it, it
//	                              is not found by search/match, and no
//	                              ReloadPolicy applying to the workload names
//	                              it
//	config-opted-out     ignore   the object's OptOutAnnotation is false
//	config-ignored       ignore   the object's reloader.stakater.com/ignore
//	                              is true
//
// A reference no rule matches counts. A malformed annotation matches nothing
// (OptedOut and optin.Check say why, for the caller to report).
func NewChain(o Options) Chain {
	return Chain{
		{SkipControlled, Drop, controlled},
		{SkipWorkloadOptedOut, Drop, o.workloadOptedOut},
		{SkipExcluded, Drop, excluded},
		{SkipAutoDisabled, Drop, autoDisabled},
		{SkipNotOptedIn, Drop, o.notOptedIn},
		{SkipConfigOptedOut, Ignore, o.configOptedOut},
		{SkipConfigIgnored, Ignore, configIgnored},
	}
}

// controlled: a Job its controller made is its controller's to restart
// (a CronJob's runs, finished ones included, are never run again).
func controlled(in Input, _ refs.Ref, _ Config) bool { return in.Controlled }

// workloadOptedOut: a workload that opts out is never restarted.
func (o Options) workloadOptedOut(in Input, _ refs.Ref, _ Config) bool {
	out, _ := OptedOut(in.Annotations, o.OptOutAnnotation)
	return out
}

// excluded: Reloader's exclude lists win over every way of opting in.
func excluded(in Input, ref refs.Ref, _ Config) bool {
	return optin.Excluded(in.Annotations, ref.Kind, ref.Name)
}

// autoDisabled: auto "false" leaves only what the reload lists name and
// search/match finds, as in Reloader.
func autoDisabled(in Input, ref refs.Ref, cfg Config) bool {
	return optin.AutoFor(in.Annotations, ref.Kind) == optin.Off && !chosen(in, ref, cfg)
}

// notOptedIn: in the annotated mode, and for a workload that is opt-in
// only in any mode, only what a workload opts in to counts.
func (o Options) notOptedIn(in Input, ref refs.Ref, cfg Config) bool {
	return (o.Discovery == DiscoveryAnnotated || in.OptInOnly) &&
		optin.AutoFor(in.Annotations, ref.Kind) != optin.On && !chosen(in, ref, cfg)
}

// chosen tells whether the object was chosen for the workload one by one:
// a reload list names it, the workload searches and the object matches, or
// a ReloadPolicy that applies to the workload names it.
func chosen(in Input, ref refs.Ref, cfg Config) bool {
	return optin.Named(in.Annotations, ref.Kind, ref.Name) || optin.Searched(optin.For(in.Annotations, ref.Kind), cfg.Annotations) ||
		in.Policies[ref.ID()]
}

// configOptedOut: an object that opts out restarts nothing when it changes.
func (o Options) configOptedOut(_ Input, _ refs.Ref, cfg Config) bool {
	out, _ := OptedOut(cfg.Annotations, o.OptOutAnnotation)
	return out
}

// configIgnored: Reloader's ignore annotation, with its meaning.
func configIgnored(_ Input, _ refs.Ref, cfg Config) bool { return optin.Ignored(cfg.Annotations) }

// OptedOut reads the opt-out annotation from an object's annotations: the
// value "false" (or anything else strconv.ParseBool reads as false) opts the
// object out. A value that is not a boolean is reported and does not opt out,
// so that a typo never silently stops restarts. The error does not quote the
// value: on a Secret, it could be anything.
func OptedOut(annotations map[string]string, key string) (bool, error) {
	v, ok := annotations[key]
	if !ok {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("annotation %s is neither true nor false; treating it as true", key)
	}
	return !b, nil
}
