package plan

// Reasons a detected change restarts nothing, as reported in logs and in the
// reason label of watcher_skipped_changes_total. SkipWorkloadOptedOut,
// SkipAutoDisabled, SkipNotOptedIn, SkipConfigOptedOut and SkipConfigIgnored
// are the names of the rules of NewChain.
const (
	SkipMetadataOnly     = "metadata-only"      // labels or annotations changed, data did not
	SkipUnusedKeys       = "unused-keys"        // the workload reads none of the changed keys
	SkipWorkloadOptedOut = "workload-opted-out" // the workload opted out
	SkipControlled       = "controlled"         // a Job with a controller (a CronJob's): its controller restarts
	SkipExcluded         = "excluded"           // an exclude list of the workload names the object
	SkipAutoDisabled     = "auto-disabled"      // the workload's auto annotation is false
	SkipNotOptedIn       = "not-opted-in"       // annotated discovery (or a Job), and the workload did not opt in
	SkipConfigOptedOut   = "config-opted-out"   // the ConfigMap or Secret opted out
	SkipConfigIgnored    = "config-ignored"     // the ConfigMap or Secret has reloader.stakater.com/ignore
	SkipConfigDeleted    = "config-deleted"     // deletion never restarts
	SkipMissingKey       = "missing-key"        // a key the pods need is gone: new pods could not start
	SkipOnDelete         = "on-delete"          // template updated, but the pods roll only when deleted
)

// SkipReason tells why p, decided from in for a user of a changed object,
// restarts nothing, or "" when it restarts. It reads the plan Decide made and
// the verdicts of in.Rules, so the reasons reported can never disagree with
// the decision, and a new rule brings its own reason, its name:
//
//	plan                                  reason
//	Restart                               ""
//	a reference dropped by a rule         the rule's name (workload-opted-out)
//	a required key missing                missing-key
//	a change ignored by a rule            the rule's name (config-opted-out)
//	anything else                         unused-keys
func (p Plan) SkipReason(in Input) string {
	if p.Action == Restart {
		return ""
	}
	for _, ref := range in.Refs {
		if verdict, rule := in.Rules.Evaluate(in, ref); verdict == Drop {
			return rule
		}
	}
	switch {
	case len(p.Missing) > 0:
		return SkipMissingKey
	case len(p.Ignored) > 0:
		_, rule := in.Rules.Evaluate(in, p.Ignored[0].Ref)
		return rule
	default:
		return SkipUnusedKeys
	}
}
