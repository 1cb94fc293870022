package policy

import (
	"fmt"
	"strings"
	"time"

	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/workload"
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

// WindowGate is the guard.Gate of maintenance windows (reason
// guard.ReasonWindow): it holds the restart of a workload outside the
// windows of the policies that apply to it (Applied.Hold), until the next
// one opens, and tells Status which restarts it holds and releases. (A
// held restart that is no longer needed, its change reverted, is released
// by StatusWriter.Decided.)
type WindowGate struct {
	Index *Index
	// Store holds the workloads and the ConfigMaps and Secrets.
	Store Workloads
	// Status, when set, lists the held restarts in the policies' status.
	Status *StatusWriter
}

var _ guard.Gate = WindowGate{}

// Check implements guard.Gate.
func (g WindowGate) Check(r guard.Request) guard.Verdict {
	obj, err := g.Store.Get(r.Workload.Kind, r.Workload.Namespace, r.Workload.Name)
	if err != nil || obj == nil {
		return guard.Verdict{}
	}
	a, err := g.Index.For(obj, nil, g.Store)
	if err != nil || len(a.Policies) == 0 {
		return guard.Verdict{}
	}
	key := workload.Key{Kind: r.Workload.Kind, Namespace: r.Workload.Namespace, Name: r.Workload.Name}
	hold, until, msg := a.Hold(r.Now)
	withWindows := a.WithWindows()
	if !hold {
		if g.Status != nil {
			// Every policy: one whose windows were removed may still list
			// the workload.
			g.Status.Released(a.Policies, key)
		}
		return guard.Verdict{}
	}
	if g.Status != nil {
		g.Status.Held(withWindows, key, r.Now)
	}
	return guard.Verdict{Hold: true, Reason: guard.ReasonWindow, Until: until, Message: "Restart held " + msg}
}

// WithWindows returns the policies of a that have maintenance windows,
// valid or not.
func (a Applied) WithWindows() []*Policy {
	var out []*Policy
	for _, p := range a.Policies {
		if len(p.Windows) > 0 || len(p.WindowErrs) > 0 {
			out = append(out, p)
		}
	}
	return out
}
