package policy

import (
	"fmt"
	"strings"
	"time"
)

// Hold tells whether the maintenance windows of the policies of a hold a
// restart at now: it waits until every policy that has windows has one
// open, and while a policy has an invalid window (until the policy is
// fixed: until is then zero). Otherwise until is when to look again: when
// the last closed policy opens a window (the policies' windows may still
// not overlap then; the restart is then held again, until the next one).
func (a Applied) Hold(now time.Time) (hold bool, until time.Time, msg string) {
	var closed []string
	for _, p := range a.Policies {
		if len(p.WindowErrs) > 0 {
			return true, time.Time{}, fmt.Sprintf("ReloadPolicy %s has an invalid maintenance window: %v", p.Name, p.WindowErrs[0])
		}
		if len(p.Windows) == 0 {
			continue
		}
		open, opens := p.Windows.State(now)
		if open {
			continue
		}
		closed = append(closed, p.Name)
		if opens.After(until) {
			until = opens
		}
	}
	if len(closed) == 0 {
		return false, time.Time{}, ""
	}
	msg = "outside the maintenance windows of ReloadPolicy " + strings.Join(closed, ", ")
	if !until.IsZero() {
		msg += "; the next opens at " + until.UTC().Format(time.RFC3339)
	}
	return true, until, msg
}
