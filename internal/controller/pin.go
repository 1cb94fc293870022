package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/note"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/snapshot"
	"github.com/watcher-dev/watcher/internal/verdict"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Event reasons of pinned config revisions (package snapshot's Pinner
// emits them).
const (
	ReasonRolledBack     = snapshot.ReasonRolledBack
	ReasonPinsStripped   = snapshot.ReasonPinsStripped
	ReasonPinningOff     = snapshot.ReasonPinningOff
	ReasonPinNameTaken   = snapshot.ReasonPinNameTaken
	ReasonPinBudgetSpent = snapshot.ReasonPinBudgetSpent
	ReasonPinsTooMany    = snapshot.ReasonPinsTooMany
	ReasonPinRefused     = snapshot.ReasonPinRefused
)

// SnapshotView sees every snapshot and pinned revision (snapshot.View).
type SnapshotView = snapshot.View

// verdictFacts returns what the rules after the decision (package verdict) read
// of w: its sources, as gathered, and its pin facts. The one place the
// controller builds them; explain and stale build the same from what
// they read.
func (r *Reconciler) verdictFacts(ctx context.Context, w *gathered) (verdict.Facts, error) {
	_, evicts := w.strategy.(restart.Evict)
	f := verdict.Gather(w.obj, w.in, w.applied.Pin, evicts)
	f.Released, f.Rolling = r.releases.Since(w.obj), !workload.Settled(w.obj)
	kind, _ := workload.ByName(w.key.Kind)
	var err error
	f.Pin, err = r.pinner.Facts(ctx, w.obj, kind, w.dry != nil, f.Pin)
	return f, err
}

// afterDecision runs the rules after the decision (verdict.Apply) on p,
// decided for w, and says what they did: a release that carries the
// change, a rollback recorded (done: nothing else to do), pins written
// again, a restart only to a rollback's content not made.
func (r *Reconciler) afterDecision(ctx context.Context, w *gathered, p plan.Plan) (_ verdict.Outcome, done bool, _ error) {
	f, err := r.verdictFacts(ctx, w)
	if err != nil {
		return verdict.Outcome{}, false, err
	}
	out := verdict.Apply(f, p)
	switch out.Rule {
	case verdict.RuleInRelease, verdict.RuleReleased:
		r.inRelease(ctx, w.obj, out.Rule, p)
	case verdict.RuleRolledBack:
		kind, _ := workload.ByName(w.key.Kind)
		if err := r.pinner.RolledBack(ctx, w.obj, kind, f); err != nil {
			return out, true, r.patchFailed(ctx, w.key, w.obj, err)
		}
		return out, true, nil
	case verdict.RuleRepin:
		if out.Plan.Action == plan.Restart {
			r.Recorder.Eventf(w.obj, nil, corev1.EventTypeWarning, ReasonPinsStripped, "Pin", "%s",
				note.Truncate(out.Why+"; restarting once to pin its config again"))
		}
	case verdict.RuleReleasing:
		ctrl.LoggerFrom(ctx).Info("Not restarting yet: the workload's own rollout carries the change; recorded once it is done, restarted if its template changes before")
	case verdict.RuleLeftByRollback:
		ctrl.LoggerFrom(ctx).Info("Not restarting: the changes are the contents a rollback left; a new content, or removing the annotation, rolls forward",
			"annotation", pin.RolledBackFrom)
	}
	if out.Template {
		w.strategy = r.templateStrategy()
		ctrl.LoggerFrom(ctx).Info("Restarting by writing the pod template once: its strategy cannot keep the pins it has, they are removed")
	}
	if out.Stale {
		r.stale.set(w.key, true)
	}
	return out, false, nil
}

// templateStrategy is the strategy of a restart that must write the pod
// template: the installation's, unless it is evict.
func (r *Reconciler) templateStrategy() restart.Strategy {
	if _, evicts := r.Config.Strategy.(restart.Evict); evicts || r.Config.Strategy == nil {
		return restart.Annotation{}
	}
	return r.Config.Strategy
}

// pinSign signs the pins watcher writes (pin.SignatureAnnotation) with the
// installation's key; nil without one.
func (r *Reconciler) pinSign() pin.Signer {
	if r.Config.Hasher == nil {
		return nil
	}
	return r.Config.Hasher.MAC
}

// pinsFor makes the snapshots of the restart of w (obj, as it will be
// patched) that out says it pins, and returns the pins to write; a
// ReloadPolicy that pins it is told (its condition Pinned).
func (r *Reconciler) pinsFor(ctx context.Context, w *gathered, obj client.Object, out verdict.Outcome) (pin.Pins, error) {
	if w.applied.Pin && r.Config.Policies != nil && r.Config.Policies.Status != nil {
		for _, p := range w.applied.Policies {
			if p.Pin {
				r.Config.Policies.Status.Enqueue(p.Key())
			}
		}
	}
	kind, _ := workload.ByName(w.key.Kind)
	return r.pinner.Pins(ctx, obj, kind, out)
}
