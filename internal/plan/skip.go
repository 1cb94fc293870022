package plan

// Reasons a detected change restarts nothing, as reported in logs and in the
// reason label of watcher_skipped_changes_total.
const (
	SkipMetadataOnly     = "metadata-only"      // labels or annotations changed, data did not
	SkipUnusedKeys       = "unused-keys"        // the workload reads none of the changed keys
	SkipWorkloadOptedOut = "workload-opted-out" // the workload opted out
	SkipConfigOptedOut   = "config-opted-out"   // the ConfigMap or Secret opted out
	SkipConfigDeleted    = "config-deleted"     // deletion never restarts
	SkipMissingKey       = "missing-key"        // a key the pods need is gone: new pods could not start
	SkipOnDelete         = "on-delete"          // template updated, but the pods roll only when deleted
)

// SkipReason tells why p, decided for a user of a changed object, restarts
// nothing, or "" when it restarts. It reads the plan Decide made, so the
// reasons reported can never disagree with the decision:
//
//	plan                                  reason
//	workload opted out (Forget or None)   workload-opted-out
//	Restart                               ""
//	a required key missing                missing-key
//	only opted-out objects changed        config-opted-out
//	anything else                         unused-keys
func (p Plan) SkipReason(in Input) string {
	switch {
	case in.OptedOut:
		return SkipWorkloadOptedOut
	case p.Action == Restart:
		return ""
	case len(p.Missing) > 0:
		return SkipMissingKey
	case len(p.Ignored) > 0:
		return SkipConfigOptedOut
	default:
		return SkipUnusedKeys
	}
}
