package hold

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/note"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/producer"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/verdict"
)

// The change set a restart waits for (guard.Settles), as the request is
// built:
//
//	kept on the workload (guard.PendingAnnotation)  the set told to the gate
//	none, or not signed for it, or stale            opened at the earliest, last changed
//	                                                at the latest change seen of its sources
//	... and no change of them seen by this process  opened and last changed when this
//	                                                process first held the restart, or now:
//	                                                it waits a whole quiet period (a new
//	                                                process cannot tell a half-landed change)
//	the same sources and contents                   opened and last changed as kept, or
//	                                                later if a change was seen since
//	another set (a source joined or changed again)  opened as kept; last changed when
//	                                                seen, or now if not seen (made while
//	                                                this replica was not watching)
//
// The changes seen are the flap detector's (every replica sees every
// change). A set kept is stale once twice its longest wait (the settle's,
// or the producers') has passed since it opened: it belongs to a change
// restarted or undone long ago.

// settle returns the change set of the restart req of obj (its workload,
// sources and time), its settings read from obj (invalid ones reported,
// and those of its policies or the installation used), else from its
// policies.
func (g *Guards) settle(obj client.Object, policy Settle, req guard.Request, report func(error)) guard.Settle {
	sources, now := req.Sources, req.Now
	s := guard.Settle{Quiet: cmp.Or(policy.Quiet, g.cfg.Settle), Max: cmp.Or(policy.Max, g.cfg.SettleMax)}
	if quiet, maxWait, err := optin.SettleOf(obj.GetAnnotations()); err != nil {
		report(err)
	} else {
		if quiet > 0 {
			s.Quiet = quiet
		}
		if maxWait > 0 {
			s.Max = maxWait
		}
	}
	if s.Max > 0 && s.Max < s.Quiet {
		s.Max = s.Quiet
	}
	if d, err := optin.PausePeriodOf(optin.Of(obj)); err != nil {
		report(err)
	} else if d > 0 {
		s = guard.Settle{Quiet: d, Max: d, Pause: true}
	}
	var first, last time.Time
	for _, src := range sources {
		if t, ok := g.flaps.LastChange(src.Object); ok {
			if t.After(last) {
				last = t
			}
			if first.IsZero() || t.Before(first) {
				first = t
			}
		}
	}
	kept, ok := g.pending(obj)
	if ok && now.After(kept.Opened.Add(2*max(s.Quiet, s.Max, g.cfg.ProducerTimeout))) {
		ok = false
	}
	if ok {
		s.Refreshed = kept.Refreshed
	}
	switch {
	case ok && kept.Holds(sources):
		s.Opened, s.Last = kept.Opened, later(kept.Last, last)
	case ok:
		s.Opened, s.Last = kept.Opened, now
		if last.After(kept.Last) {
			s.Last = last
		}
	case last.IsZero():
		// Nothing seen, nothing kept: a new process (a restart of
		// watcher, a new leader) before the set was first kept. The
		// change may be half landed: wait a whole quiet period from
		// when this process first held the restart (kept in memory,
		// so the wait ends even when nothing can be kept).
		at := cmp.Or(g.heldSince(req.Workload), now)
		s.Opened, s.Last = at, at
	default:
		s.Opened, s.Last = cmp.Or(first, now), last
	}
	return s
}

// heldSince returns when this process first held the restart of key now
// held: for its change set, else for any reason; zero if not held.
func (g *Guards) heldSince(key object.Ref) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	h, ok := g.held[key]
	if !ok {
		return time.Time{}
	}
	return cmp.Or(h.setSince, h.since)
}

// producers returns the producers of the sources of the workload key (p's
// record and changes) that have not landed what they are writing. When the
// workload asks for it (optin.RefreshSiblings) and a changed source is
// written by an ExternalSecret, its other ExternalSecrets are first asked
// to sync now, once per change set (req.Settle.Refreshed, kept with the
// set), so that a rotated pair lands as a pair.
func (g *Guards) producers(ctx context.Context, key object.Ref, obj client.Object, p plan.Plan, req *guard.Request, report func(error)) []guard.Producer {
	if g.cfg.Producers == nil {
		return nil
	}
	sources := sourcesOf(key, p)
	// The owners read on demand (package producer's Owners) are bounded
	// together: a slow API a tenant's owner kind is served by delays its
	// own restart, never a worker for long.
	reads, cancel := context.WithTimeout(ctx, producerReads)
	defer cancel()
	verdicts := g.cfg.Producers.Check(reads, sources)
	if !req.Settle.Refreshed && g.refreshSiblings(ctx, obj, req, verdicts, report) {
		req.Settle.Refreshed = true
		verdicts = g.cfg.Producers.Check(reads, sources)
	}
	var out []guard.Producer
	for _, v := range verdicts {
		// A producer that never reported a status (a SealedSecret of a
		// controller run with --update-status=false) reports no progress
		// to wait for.
		if v.State != producer.Current && v.Reason != producer.ReasonNoStatus {
			out = append(out, guard.Producer{Object: v.Producer, Source: v.Source, Failed: v.State == producer.Failed, Message: v.Message,
				Polled: !producer.Followed(v.Producer.Kind)})
		}
	}
	return out
}

// producerReads bounds the reads of owners for one decision.
const producerReads = 2 * time.Second

// Event reasons of producers: a restart rolled with producers still
// writing; the workload's other ExternalSecrets asked to sync.
const (
	ReasonProducerTimeout      = "ProducerTimeout"
	ReasonSiblingsRefreshed    = "SiblingsRefreshed"
	ReasonSiblingRefreshFailed = "SiblingRefreshFailed"
	ReasonChangeSetIncomplete  = "ChangeSetIncomplete"
)

// incomplete says that the restart of obj rolls at the settle's maximum
// although some of its sources (or its template) carry another change-set
// id than the newest.
func (g *Guards) incomplete(obj client.Object, req guard.Request) {
	var notes []string
	for _, l := range req.Settle.Lagging {
		notes = append(notes, fmt.Sprintf("%s %s has %q", l.Source.Kind, l.Source.Name, l.ID))
	}
	g.recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonChangeSetIncomplete, "Restart", "%s",
		note.Join(fmt.Sprintf("Restarting at the longest wait (%s) for change set %q, which has not fully landed: ", req.Settle.Max, req.Settle.Release), notes))
}

// refreshSiblings asks the ExternalSecrets writing the unchanged sources
// of obj to sync now, if obj asks for it and one of its changed sources
// (req.Sources) is written by an ExternalSecret; it reports whether it
// asked (a failure is reported, and counts as asked: once per set).
func (g *Guards) refreshSiblings(ctx context.Context, obj client.Object, req *guard.Request, verdicts []producer.Verdict, report func(error)) bool {
	on, err := optin.RefreshSiblingsOf(obj.GetAnnotations())
	if err != nil {
		report(err)
	}
	if !on {
		return false
	}
	changed := map[object.Ref]bool{}
	for _, s := range req.Sources {
		changed[s.Object] = true
	}
	trigger := false
	var siblings []object.Ref
	for _, v := range verdicts {
		if v.Producer.Kind != producer.KindExternalSecret {
			continue
		}
		if changed[v.Source] {
			trigger = true
		} else if v.State == producer.Current {
			siblings = append(siblings, v.Producer)
		}
	}
	if !trigger || len(siblings) == 0 {
		return false
	}
	var names, failed []string
	for _, sib := range siblings {
		if err := g.cfg.Producers.ForceSync(ctx, sib); err != nil {
			failed = append(failed, err.Error())
			continue
		}
		names = append(names, sib.Name)
	}
	if len(names) > 0 {
		g.recorder.Eventf(obj, nil, corev1.EventTypeNormal, ReasonSiblingsRefreshed, "Restart", "%s",
			note.Truncate("Asked ExternalSecret "+strings.Join(names, ", ")+" to sync now, so that the change lands as a whole"))
	}
	if len(failed) > 0 {
		g.recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonSiblingRefreshFailed, "Restart", "%s",
			note.Join("Cannot ask the other ExternalSecrets to sync (the chart's rbac.refreshSiblings grants it); restarting when they sync on their own: ", failed))
	}
	return true
}

// producerTimedOut says that the restart of obj rolls although producers
// of its sources have not landed what they are writing, or report an
// error, after the producers' timeout.
func (g *Guards) producerTimedOut(obj client.Object, req guard.Request) {
	pr := g.producing.Waited(req)[0]
	how := fmt.Sprintf("%s %s has not landed %s %s", pr.Object.Kind, pr.Object.Name, pr.Source.Kind, pr.Source.Name)
	if pr.Failed {
		how = fmt.Sprintf("%s %s, which writes %s %s, reports an error", pr.Object.Kind, pr.Object.Name, pr.Source.Kind, pr.Source.Name)
	}
	g.recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonProducerTimeout, "Restart", "%s",
		note.Truncate(fmt.Sprintf("Restarting although %s after %s (%s)", how, g.cfg.ProducerTimeout, pr.Message)))
}

// changeSets fills in s the change-set ids (optin.ChangeSet) of the sources
// of the workload key for p (p's record and changes), as facts holds them:
// the newest id among the changed sources (of the one written last,
// verdict.Newest), and the sources carrying another id; and the workload
// itself (obj), when its pod template carries another: the release will
// bring it too.
func changeSets(s *guard.Settle, key object.Ref, obj client.Object, p plan.Plan, facts map[string]verdict.Source) {
	s.Release = verdict.Newest(verdict.Facts{Sources: facts}, p)
	if s.Release == "" {
		return
	}
	for _, src := range sourcesOf(key, p) {
		if id := facts[src.Kind+"/"+src.Name].ChangeSet; id != "" && id != s.Release {
			s.Lagging = append(s.Lagging, guard.Lag{Source: src, ID: id})
		}
	}
	if id := optin.TemplateChangeSet(optin.Of(obj)); id != "" && id != s.Release {
		s.Lagging = append(s.Lagging, guard.Lag{Source: key, ID: id})
	}
}

// sourcesOf returns the ConfigMaps and Secrets of the workload key that p
// knows (its record and changes), sorted, once each.
func sourcesOf(key object.Ref, p plan.Plan) []object.Ref {
	var sources []object.Ref
	for id := range p.Record {
		if kind, name, ok := strings.Cut(id, "/"); ok && (kind == string(refs.ConfigMap) || kind == string(refs.Secret)) {
			sources = append(sources, object.Ref{Kind: kind, Namespace: key.Namespace, Name: name})
		}
	}
	for _, c := range p.Changes {
		if c.Ref.Kind == refs.ConfigMap || c.Ref.Kind == refs.Secret {
			sources = append(sources, object.Ref{Kind: string(c.Ref.Kind), Namespace: key.Namespace, Name: c.Ref.Name})
		}
	}
	slices.SortFunc(sources, object.Compare)
	return slices.Compact(sources)
}

// pending reads the change set kept on obj, if it is watcher's own.
func (g *Guards) pending(obj client.Object) (guard.Pending, bool) {
	v, ok := obj.GetAnnotations()[guard.PendingAnnotation]
	if !ok || g.cfg.Sign == nil {
		return guard.Pending{}, false
	}
	p, err := guard.DecodePending(v, string(obj.GetUID()), g.cfg.Sign)
	return p, err == nil
}

// Pending returns the value of guard.PendingAnnotation to write on obj,
// the workload key, whose restart req Admit held for its change set, so
// that whichever replica decides it next resumes the same wait: "" when
// it is not held for one, no state is kept, or obj has it already.
func (g *Guards) Pending(key object.Ref, obj client.Object, req guard.Request) string {
	if g == nil || g.cfg.Sign == nil {
		return ""
	}
	g.mu.Lock()
	h, held := g.held[key]
	g.mu.Unlock()
	if !held || (h.reason != guard.ReasonChangeSet && h.reason != guard.ReasonPausePeriod && h.reason != guard.ReasonProducer) {
		return ""
	}
	want := guard.Pending{Opened: req.Settle.Opened, Last: req.Settle.Last, Sources: req.Sources, Refreshed: req.Settle.Refreshed}
	if kept, ok := g.pending(obj); ok && kept.Equal(want) {
		return ""
	}
	return want.Encode(string(obj.GetUID()), g.cfg.Sign)
}

// Event reasons of change sets.
const (
	ReasonChangeSetOpen     = "ChangeSetOpen"
	ReasonChangeSetComplete = "ChangeSetComplete"
)

// completed says that the change set key waited for rolled out, with
// every source rolled together, held since.
func (g *Guards) completed(obj client.Object, req guard.Request, since time.Time) {
	names := make([]string, 0, len(req.Sources))
	for _, s := range req.Sources {
		names = append(names, s.Object.Kind+" "+s.Object.Name)
	}
	g.recorder.Eventf(obj, nil, corev1.EventTypeNormal, ReasonChangeSetComplete, "Restart", "%s",
		note.Truncate(fmt.Sprintf("Change set complete after %s: rolling out %s together",
			req.Now.Sub(since).Round(time.Second), strings.Join(names, ", "))))
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
