package explain

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/verdict"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Pin is how a source of a workload that pins its config is read.
type Pin struct {
	// State is pinned (its pods read Snapshot), floating (they read the
	// live object: Reason says why) or next-restart (pinned at the next
	// restart).
	State    string `json:"state"`
	Snapshot string `json:"snapshot,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Live names the snapshot of its content now, when known and not the
	// one pinned; LeftByRollback says that content is what a rollback
	// left (verdict.LeftByRollback): a restart to it is not made.
	Live           string `json:"live,omitempty"`
	LeftByRollback bool   `json:"leftByRollback,omitempty"`
}

// The states of Pin.
const (
	PinPinned   = "pinned"
	PinFloating = "floating"
	PinNext     = "next-restart"
)

// Verdict is what the rules after the decision (package verdict, the
// controller's chain) made of the decision.
type Verdict struct {
	// Decided is plan.Decide's action, before the chain; the report's
	// Action is the one after it.
	Decided string `json:"decided"`
	// Rule is the rule of the chain that changed the decision
	// (verdict.Rule*: ChangeSetSeen, InRelease, RolledBack, Repin,
	// LeftByRollback), "" when none; Why says why (Repin).
	Rule string `json:"rule,omitempty"`
	Why  string `json:"why,omitempty"`
	// Stale: a restart was due and is not made (a rollback's content).
	Stale bool `json:"stale,omitempty"`
	// Pinning: the chain ran with pinning on for the workload
	// (verdict.Pinning.On); PinnedBefore, Missing: the pin facts read.
	Pinning      bool     `json:"pinning"`
	PinnedBefore bool     `json:"pinnedBefore,omitempty"`
	Missing      []string `json:"missing,omitempty"`
	// TooMany: the restart would pin more than pin.MaxPins: it pins
	// nothing.
	TooMany bool `json:"tooMany,omitempty"`
	// WritePins: the write (a restart, a release repinned) writes the
	// pins of the template anew: Pins ("Kind/name"), none: they are
	// removed and the pods read the live objects (Outcome.WritePins,
	// Outcome.Pins).
	WritePins bool     `json:"writePins,omitempty"`
	Pins      []string `json:"pins,omitempty"`
}

// verdictOf says what the chain made of the decision p.
func verdictOf(f verdict.Facts, p plan.Plan, out verdict.Outcome) *Verdict {
	v := &Verdict{Decided: p.Action.String(), Rule: out.Rule, Why: out.Why, Stale: out.Stale,
		Pinning: f.Pin.On, PinnedBefore: f.Pin.PinnedBefore, Missing: f.Pin.Missing, TooMany: out.TooMany, WritePins: out.WritePins}
	for _, src := range out.Pins {
		kind := refs.ConfigMap
		if src.Kind == pin.Secret {
			kind = refs.Secret
		}
		v.Pins = append(v.Pins, string(kind)+"/"+src.Name)
	}
	return v
}

// policyPins reports whether a ReloadPolicy with pin applies to the
// workload obj, whose references are uses, as the controller reads them.
func (s Settings) policyPins(obj client.Object, uses []refs.Ref) bool {
	if s.Policies == nil {
		return false
	}
	a, err := s.Policies.For(obj, uses, s.configs())
	return err == nil && a.Pin
}

// facts returns the facts of w whose decision's input is in, gathered
// as the controller gathers them (verdict.Gather), with the pin facts
// only the caller knows: whether the installation pins (Settings.Pinning,
// for a kind that keeps templates in revisions), the snapshots not found
// and a pinned revision (Workload.Missing, Workload.PinnedBefore).
func (s Settings) facts(w Workload, in plan.Input) verdict.Facts {
	obj := w.Object
	strategy, _ := restart.For(obj, s.Strategy)
	_, evicts := strategy.(restart.Evict)
	f := verdict.Gather(obj, in, s.policyPins(obj, in.Refs), evicts)
	k, ok := workload.Of(obj)
	if !s.Pinning || !ok || !k.Pinnable || (!f.Pin.Wanted && len(f.Pin.Template) == 0) {
		return f
	}
	f.Pin = f.Pin.Completed(true, w.Missing, w.PinnedBefore)
	return f
}

// pinOf says how the source u of the workload of f is read, as the chain
// read it (out); nil when the workload does not pin its config, or u is
// no ConfigMap or Secret its pod spec reads.
func pinOf(f verdict.Facts, out verdict.Outcome, u Use) *Pin {
	if !f.Pin.Wanted && len(f.Pin.Template) == 0 {
		return nil
	}
	src, ok := pin.SourceOf(u.Kind, u.Name)
	if !ok {
		return nil
	}
	s, ok := f.Sources[u.Kind+"/"+u.Name]
	if !ok || !s.PodSpec {
		return nil
	}
	if snap, pinned := f.Pin.Template[src]; pinned {
		p := &Pin{State: PinPinned, Snapshot: snap}
		if s.Snapshot != "" && s.Snapshot != snap {
			p.Live = s.Snapshot
			change := plan.Plan{Action: plan.Restart, Changes: []plan.Change{{Ref: refs.Ref{Kind: refs.Kind(u.Kind), Name: u.Name}}}}
			p.LeftByRollback = verdict.LeftByRollback(f, change)
		}
		return p
	}
	switch {
	case !f.Pin.On:
		return &Pin{State: PinFloating, Reason: "pinning is off (not installed, or its admission policy is missing)"}
	case f.Pin.Evicts:
		return &Pin{State: PinFloating, Reason: "its restart strategy does not write the pod template (evict)"}
	case !f.Pin.Wanted:
		return &Pin{State: PinFloating, Reason: "the workload no longer asks for pinning (" + pin.Annotation + ")"}
	}
	floating := out.Floating
	if floating == nil {
		_, floating = verdict.Pinnable(f)
	}
	if why, ok := floating[src]; ok {
		return &Pin{State: PinFloating, Reason: why}
	}
	if !s.Present {
		return nil
	}
	if out.TooMany {
		return &Pin{State: PinFloating, Reason: "the restart would pin more ConfigMaps and Secrets than the admission policy can evaluate"}
	}
	return &Pin{State: PinNext}
}

// verdictStatus says in one sentence what the chain did, "" when it
// changed nothing worth saying.
func verdictStatus(f verdict.Facts, out verdict.Outcome) string {
	switch out.Rule {
	case verdict.RuleChangeSetSeen:
		return "up to date: watcher records the template's change set " + optin.TemplateChangeSet(f.Annotations) + " as seen, no restart"
	case verdict.RuleInRelease:
		return "in release: the workload's own rollout (change set " + optin.TemplateChangeSet(f.Annotations) + ") carries the change; watcher records it, no restart"
	case verdict.RuleRolledBack:
		return "rolled back: watcher records the rollback (the revision it runs, the contents it left), no restart"
	case verdict.RuleLeftByRollback:
		return "rolled back: not rolling forward to the content the rollback left (" + pin.RolledBackFrom + ") until another content arrives or the annotation is removed"
	case verdict.RuleRepin:
		if out.Plan.Action == plan.Restart {
			return "would pin again: " + out.Why + "; watcher restarts once to pin its config again"
		}
		return "would pin again: " + out.Why
	}
	return ""
}
