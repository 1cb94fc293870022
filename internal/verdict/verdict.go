// Package verdict holds the rules watcher applies after plan.Decide, as
// one chain of pure functions of a workload's gathered facts (Facts) and
// the plan: a release that carries the change, a native rollback, pins a
// tool stripped or that name nothing, a restart only to what a rollback
// left, and which sources a restart pins. The controller runs the chain
// before it writes, and explain and stale run the same chain on the facts
// they read, so that what they say is what the controller does.
//
// The chain, in order (the first rule that ends the chain wins; the pin
// rules run only for a workload the installation pins: Facts.Pin.On):
//
//	rule             when                                         the plan becomes
//	ChangeSetSeen    nothing to do, the template's change-set id   a Refresh that records
//	                 is not the one recorded (an image-only        the id (no rollout)
//	                 release)
//	InRelease        a restart whose every changed source carries  a Refresh; a pinned
//	                 the template's change-set id, no source       template is repinned to
//	                 another, the id not recorded yet (one         the content recorded
//	                 release of config and image together)
//	Released         a restart whose every changed source was last   a Refresh that records
//	                 written before the write that made the         them (no rollout), once
//	                 template (watcher saw it made:                 that rollout is done;
//	                 Facts.Released), and that the template does    until then nothing
//	                 not pin (a release without ids: kubectl apply  (Releasing, stale): an
//	                 -f dir/, helm upgrade, an Argo CD sync)        undo meanwhile keeps
//	                                                                the pods from before
//	RolledBack       the template pins another revision than the   nothing but the rollback
//	                 one watcher wrote, every snapshot exists       recorded (RolledBack)
//	Repin            the template lost its pins (a tool stripped   a restart to pin again,
//	                 them, a replace: a pinned revision exists),   with a Warning
//	                 or pins a snapshot that does not exist, or
//	                 pins a source that floats and changed
//	LeftByRollback   a restart only to the contents a rollback     nothing (the restart is
//	                 left                                          stale)
//	Pins             a restart of a pinned workload               the sources it pins
//
// What a restart of a pinned workload pins (Outcome.Pins): every
// ConfigMap and Secret its pod spec reads that exists, is not itself a
// snapshot, and does not float: whose changes the rules count (not opted
// out, inside its reload lists) and that pin.Floats does not let float.
// More than pin.MaxPins pins nothing (Outcome.TooMany), since the
// admission policy could not evaluate them. A restart whose strategy does
// not write the pod template (evict, Argo's restartAt) pins nothing; if
// the template still has pins, that restart writes the template once
// (Outcome.Template) to remove them, so that no pod is left reading an
// older content.
package verdict

import (
	"cmp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
)

// Facts are what the rules after the decision read of one workload,
// gathered once (by the controller from its store, by the CLI from what
// it read).
type Facts struct {
	// Annotations are the workload's, as optin.Of returns them (its pod
	// template's change-set id and pins included).
	Annotations map[string]string
	// Sources are its ConfigMaps and Secrets, by refs.Ref.ID.
	Sources map[string]Source
	// Recorded is its record, and Version the newest resourceVersion of
	// the objects it was made from (plan.Input's).
	Recorded plan.Record
	Version  string
	// Pin are its pin facts.
	Pin Pinning
	// Released is the resourceVersion of the write that made its pod
	// template, when watcher saw that write made and a template change
	// rolls every pod (workload.Releases.Since); "" when not known: the
	// CLI never knows it, nor a watcher started since.
	Released string
	// Rolling: the workload's rollout is not done (its controller has not
	// observed its generation, or pods of another template run:
	// workload.Settled false). A release's change is recorded only once
	// it is done: an undo before (kubectl rollout undo) goes back to a
	// ReplicaSet whose pods predate the change, and keeps them.
	Rolling bool
}

// Source is what the rules read of one ConfigMap or Secret a workload
// uses.
type Source struct {
	// Present: it exists.
	Present bool
	// Version is its resourceVersion.
	Version string
	// ChangeSet is its optin.ChangeSet id, "" when none.
	ChangeSet string
	// Sum is the keyed digest of its content now (hash.Digest.Sum, hex),
	// and Snapshot the name of its snapshot (pin.SnapshotName); "" when
	// not known.
	Sum, Snapshot string
	// Release is its guard.ReleaseAnnotation: a new value releases a
	// hold of a restart it caused.
	Release string
	// IsSnapshot: it is itself a snapshot (never a source of pins).
	IsSnapshot bool
	// PodSpec: the pod spec reads it (not only a reload list or policy).
	PodSpec bool
	// Floats says why it must stay live ("" when it may be pinned): its
	// annotations (pin.Floats), or the rules, which do not count its
	// changes (opted out, outside a reload list).
	Floats string
}

// Pinning are a workload's pin facts.
type Pinning struct {
	// On: the installation pins this workload's restarts (pinning
	// installed, its kind keeps templates in revisions, not dry-run).
	On bool
	// Wanted: it asks for pinning (its annotation, or a ReloadPolicy).
	Wanted bool
	// Evicts: its restart does not write the pod template (evict).
	Evicts bool
	// Template are the pins of its pod template; Revision the digest
	// watcher last wrote (pin.RevisionLabel); From what a rollback left
	// (pin.RolledBackFrom).
	Template pin.Pins
	Revision string
	From     pin.Pins
	// Missing names the snapshots Template pins that do not exist, as
	// seen by what sees every snapshot.
	Missing []string
	// PinnedBefore: a revision of the workload is pinned, so a template
	// with neither pins nor label lost them (a replace).
	PinnedBefore bool
}

// The rules of the chain (Outcome.Rule).
const (
	RuleChangeSetSeen  = "ChangeSetSeen"
	RuleInRelease      = "InRelease"
	RuleReleased       = "Released"
	RuleReleasing      = "Releasing"
	RuleRolledBack     = "RolledBack"
	RuleRepin          = "Repin"
	RuleLeftByRollback = "LeftByRollback"
)

// Outcome is what the chain made of a plan.
type Outcome struct {
	// Sources are the facts of the workload's sources it was made from,
	// for what acts on the outcome (the guards).
	Sources map[string]Source
	// Plan is the plan to apply.
	Plan plan.Plan
	// Rule names the rule that changed the plan ("" when none); Why
	// says why, for an Event (Repin).
	Rule, Why string
	// WritePins: the write carries pins: Pins (none: they are removed).
	WritePins bool
	Pins      []pin.Source
	// Floating are the sources left live, and why.
	Floating map[pin.Source]string
	// TooMany: the restart would pin more than pin.MaxPins: it pins
	// nothing.
	TooMany bool
	// Template: the restart writes the pod template although its
	// strategy does not (to remove pins it cannot keep).
	Template bool
	// Wanted: the workload pins; a write of no pins (none could be
	// made) marks it as pinned by watcher with none (pin.Unpinned), so
	// that it is not taken for a replace.
	Wanted bool
	// Stale: a restart was due and is not made (a rollback's content).
	Stale bool
}

// Apply runs the chain on p, decided for the workload of f.
func Apply(f Facts, p plan.Plan) Outcome {
	due := p.Action == plan.Restart
	out := Outcome{Plan: p, Sources: f.Sources}
	if seen, ok := changeSetSeen(f, p); ok {
		out.Plan, out.Rule = seen, RuleChangeSetSeen
	} else if InRelease(f, p) {
		out.Plan.Action, out.Rule = plan.Refresh, RuleInRelease
	} else if Released(f, p) && f.Rolling {
		// Not recorded yet: decided again when the rollout is done (its
		// status changes the stored workload), restarted if its
		// template changes before.
		out.Plan, out.Rule, out.Stale = plan.Plan{Action: plan.None}, RuleReleasing, due
	} else if Released(f, p) {
		out.Plan.Action, out.Rule = plan.Refresh, RuleReleased
	}
	if !f.Pin.On {
		// Pinning is off: new pods read the live objects; a template
		// write removes the pins left from before, which would apply
		// again once it is back.
		out.WritePins = len(f.Pin.Template) > 0 && (out.Plan.Action == plan.Restart || out.Rule == RuleInRelease)
		return out
	}
	if len(f.Pin.Template) == 0 && !f.Pin.Wanted {
		return out
	}
	if f.Pin.Evicts || !f.Pin.Wanted {
		if out.Rule != RuleInRelease && out.Plan.Action != plan.Restart && len(f.Pin.Missing) == 0 &&
			pin.Judge(f.Pin.Template, f.Pin.Revision) == pin.RolledBack {
			return Outcome{Rule: RuleRolledBack, Sources: f.Sources} // a rollback to a pinned revision
		}
		unpin(f, &out)
		return out
	}
	if out.Rule != RuleInRelease {
		if rolled, why := judge(f, out.Plan); rolled {
			return Outcome{Rule: RuleRolledBack, Sources: f.Sources}
		} else if why != "" {
			out.Plan, out.Rule, out.Why = repin(f, out.Plan), RuleRepin, why
		}
	}
	if out.Plan.Action == plan.Restart && LeftByRollback(f, out.Plan) {
		return Outcome{Plan: plan.Plan{Action: plan.None}, Rule: RuleLeftByRollback, Stale: due, Sources: f.Sources}
	}
	out.Wanted = true
	pins(f, &out)
	return out
}

// pins sets what the write of out.Plan does with the pins.
func pins(f Facts, out *Outcome) {
	restart := out.Plan.Action == plan.Restart
	if !restart && out.Rule != RuleInRelease {
		return
	}
	sources, floating := Pinnable(f)
	if out.Rule == RuleInRelease && sameContent(f, sources) {
		return // the template already pins the content recorded
	}
	out.WritePins, out.Floating = true, floating
	if len(sources) > pin.MaxPins {
		out.TooMany = true
		return
	}
	out.Pins = sources
}

// unpin sets what becomes of the pins left on the template of a workload
// that cannot pin (its strategy does not write the template) or no longer
// asks to: its restart removes them, writing the template once; and when
// they name a content that is not the live one, or a snapshot that does
// not exist, it is restarted for it (its pods would come back on them).
func unpin(f Facts, out *Outcome) {
	if len(f.Pin.Template) == 0 {
		return
	}
	if out.Rule == RuleInRelease { // the release's own rollout: its pods read the live objects
		out.WritePins = true
		return
	}
	if out.Plan.Action != plan.Restart {
		why := cmp.Or(stale(f, out.Plan), floatingChanged(f, out.Plan))
		if len(f.Pin.Missing) > 0 {
			why = "The pod template pins snapshots that do not exist: " + strings.Join(f.Pin.Missing, ", ")
		}
		if why == "" {
			return
		}
		out.Plan, out.Rule, out.Why = repin(f, out.Plan), RuleRepin, why+"; its pins are removed"
		if out.Plan.Action != plan.Restart {
			return
		}
	}
	out.WritePins, out.Template = true, f.Pin.Evicts
}

// stale says which sources the template pins at a content that is not
// the live one although the plan p has no change of them (a release whose
// tool kept watcher's pins while pinning was off, an older template
// re-applied, a source that floats now changed while pinning was off):
// not a rollback (pin.RolledBackFrom names what a rollback left); "" when
// none.
func stale(f Facts, p plan.Plan) string {
	changed := map[string]bool{}
	for _, c := range append(slices.Clone(p.Changes), p.Ignored...) {
		changed[c.Ref.ID()] = true
	}
	var out []string
	for _, src := range pin.Sorted(f.Pin.Template) {
		s, ok := f.Sources[src.ID()]
		if !ok || changed[src.ID()] || s.Snapshot == "" {
			continue
		}
		if name := f.Pin.Template[src]; name != s.Snapshot && f.Pin.From[src] != s.Snapshot {
			out = append(out, src.Kind+" "+src.Name)
		}
	}
	if len(out) == 0 {
		return ""
	}
	return "The pod template pins older contents than the live ones of " + strings.Join(out, ", ")
}

// sameContent reports whether the template pins exactly the snapshots of
// sources' contents now.
func sameContent(f Facts, sources []pin.Source) bool {
	if len(sources) != len(f.Pin.Template) {
		return false
	}
	for _, src := range sources {
		s := f.Sources[src.ID()]
		if s.Snapshot == "" || f.Pin.Template[src] != s.Snapshot {
			return false
		}
	}
	return true
}

// Pinnable returns the sources a restart of the workload of f pins, in
// order, and those it leaves live with why (see the package comment).
func Pinnable(f Facts) ([]pin.Source, map[pin.Source]string) {
	var out []pin.Source
	floating := map[pin.Source]string{}
	for _, id := range sortedIDs(f.Sources) {
		s := f.Sources[id]
		kind, name, _ := strings.Cut(id, "/")
		src, ok := pin.SourceOf(kind, name)
		if !ok || !s.Present || !s.PodSpec {
			continue
		}
		switch {
		case s.IsSnapshot:
			floating[src] = "a snapshot"
		case s.Floats != "":
			floating[src] = s.Floats
		default:
			out = append(out, src)
		}
	}
	return out, floating
}

// judge reads what the template of a pinned workload says against the
// revision watcher last wrote (pin.Judge): rolled back (every snapshot
// there), or why it must be pinned again ("" when not).
func judge(f Facts, p plan.Plan) (rolledBack bool, why string) {
	verdict := pin.Judge(f.Pin.Template, f.Pin.Revision)
	switch {
	case len(f.Pin.Missing) > 0:
		return false, "The pod template pins snapshots that do not exist: " + strings.Join(f.Pin.Missing, ", ")
	case verdict == pin.RolledBack:
		return true, ""
	case verdict == pin.Stripped:
		return false, "The pod template lost its pins (" + pin.PinsAnnotation + ")"
	case verdict == pin.Unpinned && f.Pin.PinnedBefore:
		return false, "The pod template and the workload lost their pins (a replace)"
	}
	if why := stale(f, p); why != "" {
		return false, why
	}
	return false, floatingChanged(f, p)
}

// floatingChanged says which source the template pins although it floats
// and that p finds changed: its pods would never see the change; "" when
// none.
func floatingChanged(f Facts, p plan.Plan) string {
	for _, c := range append(slices.Clone(p.Changes), p.Ignored...) {
		src, ok := pin.SourceOf(string(c.Ref.Kind), c.Ref.Name)
		if !ok {
			continue
		}
		if _, pinned := f.Pin.Template[src]; pinned && floats(f.Sources[c.Ref.ID()]) {
			return "The pod template pins " + src.Kind + " " + src.Name + ", which floats, and it changed"
		}
	}
	return ""
}

// floats reports whether s is never pinned.
func floats(s Source) bool { return s.IsSnapshot || s.Floats != "" || !s.PodSpec }

// repin makes p a restart, to write the pins again, when it is none (or
// only a record refresh): with the record it would write, or the one
// the workload has.
func repin(f Facts, p plan.Plan) plan.Plan {
	if p.Action != plan.None && p.Action != plan.Refresh {
		return p
	}
	p = withRecord(f, p)
	if p.Record != nil {
		p.Action = plan.Restart
	}
	return p
}

// withRecord gives p, which writes no record, the workload's.
func withRecord(f Facts, p plan.Plan) plan.Plan {
	if p.Record == nil {
		p.Record, p.Version = f.Recorded, f.Version
	}
	return p
}

// LeftByRollback reports whether the restart p only rolls forward to the
// contents a rollback left (pin.LeftByRollback on the workload's
// pin.RolledBackFrom): the controller does not make it.
func LeftByRollback(f Facts, p plan.Plan) bool {
	if p.Action != plan.Restart {
		return false
	}
	sources := make([]pin.Source, 0, len(p.Changes))
	for _, c := range p.Changes {
		src, ok := pin.SourceOf(string(c.Ref.Kind), c.Ref.Name)
		if !ok {
			return false
		}
		sources = append(sources, src)
	}
	return pin.LeftByRollback(f.Pin.From, sources, func(src pin.Source) string {
		return f.Sources[src.ID()].Snapshot
	})
}

// InRelease reports whether the restart p is carried by the workload's
// own rollout: its pod template is of change set T (optin.ChangeSet),
// not the one recorded with its record (optin.RecordedChangeSet: watcher
// has not seen the template at T yet), every changed ConfigMap and Secret
// carries T (a source changed without it, or by hand after the release
// was recorded, restarts), and no source of the workload carries another
// id (the release has not fully landed).
func InRelease(f Facts, p plan.Plan) bool {
	changes := p.Changes
	if p.Action == plan.Refresh {
		changes = p.Ignored // a pinned floating source's change rides along (pins)
	}
	if (p.Action != plan.Restart && p.Action != plan.Refresh) || len(changes) == 0 {
		return false
	}
	tmpl := optin.TemplateChangeSet(f.Annotations)
	if tmpl == "" || f.Annotations[optin.RecordedChangeSet] == tmpl {
		return false
	}
	for _, c := range changes {
		if c.Ref.Kind != refs.ConfigMap && c.Ref.Kind != refs.Secret {
			return false
		}
		if s := f.Sources[c.Ref.ID()]; s.ChangeSet != tmpl {
			return false
		}
	}
	for _, s := range f.Sources {
		if s.ChangeSet != "" && s.ChangeSet != tmpl {
			return false
		}
	}
	return true
}

// Released reports whether the restart p is carried by the workload's
// own rollout although no change-set id says so: every changed ConfigMap
// and Secret exists, was last written before the write that made the pod
// template (Facts.Released: resourceVersions compared), and is not pinned
// by the template, so the pods that rollout makes read it as it is now.
// A source written after the template, or at a version that cannot be
// compared, restarts.
func Released(f Facts, p plan.Plan) bool {
	if p.Action != plan.Restart || len(p.Changes) == 0 || f.Released == "" {
		return false
	}
	for _, c := range p.Changes {
		src, ok := pin.SourceOf(string(c.Ref.Kind), c.Ref.Name)
		if !ok {
			return false
		}
		if _, pinned := f.Pin.Template[src]; pinned {
			return false
		}
		s, ok := f.Sources[c.Ref.ID()]
		if !ok || !s.Present {
			return false
		}
		if n, err := resourceversion.CompareResourceVersion(s.Version, f.Released); err != nil || n >= 0 {
			return false
		}
	}
	return true
}

// changeSetSeen makes p, which has nothing to do, a Refresh recording the
// template's change-set id when it is not the one recorded: a release
// that changed no source (an image only) is then known as seen, so that a
// later hand edit of a source keeping the id restarts.
func changeSetSeen(f Facts, p plan.Plan) (plan.Plan, bool) {
	if p.Action != plan.None || len(p.Missing) > 0 || f.Recorded == nil {
		return p, false
	}
	tmpl := optin.TemplateChangeSet(f.Annotations)
	if tmpl == "" || f.Annotations[optin.RecordedChangeSet] == tmpl {
		return p, false
	}
	p = withRecord(f, p)
	p.Action = plan.Refresh
	return p, true
}

// Newest returns, of the changed ConfigMaps and Secrets of p, the
// change-set id of the one written last (by resourceVersion) among those
// that carry one; "" when none does.
func Newest(f Facts, p plan.Plan) string {
	id, newest := "", ""
	for _, c := range p.Changes {
		s := f.Sources[c.Ref.ID()]
		if s.ChangeSet == "" {
			continue
		}
		if n, err := resourceversion.CompareResourceVersion(s.Version, newest); newest == "" || (err == nil && n > 0) {
			id, newest = s.ChangeSet, s.Version
		}
	}
	return id
}

// sortedIDs returns the keys of m in order.
func sortedIDs(m map[string]Source) []string {
	out := make([]string, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}
