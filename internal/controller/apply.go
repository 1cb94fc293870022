package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/hold"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/note"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/verdict"
	"github.com/watcher-dev/watcher/internal/workload"
)

// apply carries out p, decided from w, on obj (w's workload; for a Job,
// as jobFacts read it) with at most one patch. Every patch carries obj's
// resourceVersion, so it fails with a conflict instead of acting on a
// stale decision.
func (r *Reconciler) apply(ctx context.Context, w *gathered, obj client.Object, p plan.Plan) error {
	log := ctrl.LoggerFrom(ctx)
	key, in := w.key, w.in
	for _, c := range p.Ignored {
		_, rule := in.Rules.Evaluate(in, c.Ref)
		log.V(1).Info("Change ignored: the object opted out", "source", c.Ref.Object(key.Namespace).String(), "reason", rule)
	}
	if len(p.Missing) > 0 {
		r.missing(ctx, key, obj, p.Missing)
	}
	strategy := r.strategy(ctx, obj, w.strategy, w.badStrategy) // strategy.go
	if w.dry != nil {
		// Dry-run writes nothing, so it holds nothing either: the guards
		// are not asked (a wave slot would never be freed).
		if p.Action != plan.None {
			r.dryApply(ctx, w.dry, key, obj, p)
		}
		return nil
	}
	onDelete := w.onDelete
	if _, evicts := w.strategy.(restart.Evict); evicts {
		onDelete = "" // watcher replaces the pods itself (evictStep)
	}
	req, gated, admitted := r.gate(ctx, key, obj, p, onDelete, hold.Facts{Settle: hold.Settle{Quiet: w.applied.Settle, Max: w.applied.SettleMax}, Sources: w.outcome.Sources})
	if !admitted {
		return r.keepPending(ctx, key, obj, req)
	}
	if p.Action == plan.None {
		return nil
	}
	req.Evict = w.evicts()                             // kept in its state, for the guards' restore
	obj, err := r.write(ctx, w, obj, p, strategy, req) // job.go
	if gated {
		r.guards.Done(ctx, key, obj, req, err)
	}
	if err != nil {
		if p.Action == plan.Restart && !apierrors.IsConflict(err) { // a conflict is decided again (walk)
			metrics.Restart(key.Kind, key.Namespace, metrics.RestartFailed)
		}
		return err
	}
	switch p.Action {
	case plan.Forget:
		log.V(1).Info("Workload opted out; record removed")
	case plan.Adopt:
		metrics.Adoptions.WithLabelValues(key.Kind).Inc()
		log.V(1).Info("Workload adopted: hashes recorded, nothing restarted")
	case plan.Refresh:
		log.V(1).Info("Record refreshed, nothing restarted")
	case plan.Restart:
		w.restarted = true
		said := r.cause(key, p.Changes)
		said.OnDelete = onDelete
		r.announce(ctx, obj, said, p.Record.RestartID(), strategy.Name())
		if onDelete != "" {
			// The template changed, but the workload's controller replaces
			// no pod until it is deleted: no restart to count.
			return nil
		}
		r.restartedForPolicies(w.applied, key, p)
		r.cronJobs.Run(ctx, key, obj, p.Record.RestartID())
	}
	return nil
}

// keepPending writes on obj the change set its held restart waits for
// (hold.Guards.Pending), so that whichever replica decides it next, after
// a restart of watcher or a lease handover, resumes the same wait. One
// patch of that annotation, made when the wait begins or the set grows.
func (r *Reconciler) keepPending(ctx context.Context, key workload.Key, obj client.Object, req guard.Request) error {
	v := r.guards.Pending(key, obj, req)
	if v == "" {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{ // strings always marshal
		"resourceVersion": obj.GetResourceVersion(),
		"annotations":     map[string]string{guard.PendingAnnotation: v},
	}})
	if err := r.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return r.patchFailed(ctx, key, obj, err)
	}
	return nil
}

// inRelease says that the restart p of obj is carried by its own
// rollout (the verdict's rule): its template is of the same change set as
// its changed sources, or was written after them (a release without ids);
// its record is brought up to date.
func (r *Reconciler) inRelease(ctx context.Context, obj client.Object, rule string, p plan.Plan) {
	why, reason := "the pod template is of change set "+strconv.Quote(optin.TemplateChangeSet(optin.Of(obj)))+", like its changed sources", ReasonChangeSetInRelease
	if rule == verdict.RuleReleased {
		var changed []string
		for _, c := range p.Changes {
			changed = append(changed, string(c.Ref.Kind)+" "+c.Ref.Name)
		}
		why, reason = "the pod template was written after "+strings.Join(changed, ", "), ReasonReleased
	}
	ctrl.LoggerFrom(ctx).Info("Not restarting: the workload's own rollout carries the change", "rule", rule)
	r.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, reason, "Record", "%s", note.Truncate("Not restarting: "+why+": its own rollout carries the change"))
}

// Event reasons (those of restarts are package cause's).
const (
	ReasonChangeSetInRelease = "ChangeSetInRelease"
	ReasonReleased           = "Released"
	ReasonMissingKey         = "MissingKey"
	ReasonWriteFailed        = "WriteFailed"
)

// missing says that a restart is held because keys the pods need are gone.
func (r *Reconciler) missing(ctx context.Context, key workload.Key, obj client.Object, ms []plan.Missing) {
	var notes []string
	for _, m := range ms {
		if m.Keys == nil {
			notes = append(notes, fmt.Sprintf("%s %s is gone", m.Ref.Kind, m.Ref.Name))
		} else {
			notes = append(notes, fmt.Sprintf("%s %s has no key %s", m.Ref.Kind, m.Ref.Name, strings.Join(m.Keys, ", ")))
		}
		ctrl.LoggerFrom(ctx).Info("Not restarting: a key the pods need is missing", "source", m.Ref.Object(key.Namespace).String(), "keys", m.Keys, "reason", plan.SkipMissingKey)
	}
	r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonMissingKey, "Restart", "%s",
		note.Join("Not restarting until it is back, new pods could not start: ", notes))
}

// patchFailed reports a failed patch. A patch the API server refuses as
// invalid or too large would fail again however often it is sent: it is
// reported on the workload and not retried (a later change of the workload
// or its configuration tries again).
func (r *Reconciler) patchFailed(ctx context.Context, key workload.Key, obj client.Object, err error) error {
	err = fmt.Errorf("patch %s: %w", key, err)
	if !apierrors.IsInvalid(err) && !apierrors.IsRequestEntityTooLargeError(err) && !apierrors.IsBadRequest(err) {
		return err
	}
	metrics.Errors.WithLabelValues("patch").Inc()
	ctrl.LoggerFrom(ctx).Error(err, "The API server refuses the record; not retrying")
	r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonWriteFailed, "Record", "%s", note.Truncate("Cannot record the configuration hashes: "+err.Error()))
	return reconcile.TerminalError(err)
}
