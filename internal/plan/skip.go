package plan

import "github.com/watcher-dev/watcher/internal/refs"

// Reasons a detected change restarts nothing, as reported in logs and in the
// reason label of watcher_skipped_changes_total.
const (
	SkipMetadataOnly     = "metadata-only"      // labels or annotations changed, data did not
	SkipUnusedKeys       = "unused-keys"        // the workload reads none of the changed keys
	SkipWorkloadOptedOut = "workload-opted-out" // the workload opted out
	SkipConfigOptedOut   = "config-opted-out"   // the ConfigMap or Secret opted out
	SkipConfigDeleted    = "config-deleted"     // deletion never restarts
)

// Triage tells, for one workload that refers to an object whose keys
// changed, why the change cannot restart it, or "" if it may. uses are the
// workload's references (refs.FromPodSpec); id is the changed object's
// Ref.ID().
//
//	workload opted out   workload reads a changed key   reason
//	yes                  -                              workload-opted-out
//	no                   no                             unused-keys
//	no                   yes                            ""
//
// Triage only saves work and explains skips: Decide stays the authority.
func Triage(workloadOptedOut bool, uses []refs.Ref, id string, changed []string) string {
	if workloadOptedOut {
		return SkipWorkloadOptedOut
	}
	for _, r := range uses {
		if r.ID() != id {
			continue
		}
		for _, k := range changed {
			if r.Uses(k) {
				return ""
			}
		}
	}
	return SkipUnusedKeys
}
