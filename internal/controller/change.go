package controller

import (
	"context"
	"errors"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watcher-dev/watcher/internal/lock"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/workload"
)

// processChange handles one change of a ConfigMap or Secret on the replica
// that takes its lock: it says what changed and reconciles every workload
// that reads a changed key. If any of them fails, the lock is released
// without marking the change done, and the change is retried.
func (r *Reconciler) processChange(ctx context.Context, req Request) (reconcile.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	held, outcome, err := r.Config.Locker.Acquire(ctx, req.LockID())
	switch {
	case err != nil:
		metrics.LockAcquisitions.WithLabelValues("error").Inc()
		metrics.Errors.WithLabelValues("lock").Inc()
		log.Error(err, "Cannot take the lock of the change; retrying with backoff")
		return reconcile.Result{}, err
	case outcome == lock.Done:
		metrics.LockAcquisitions.WithLabelValues("done").Inc()
		log.V(1).Info("Change processed by another replica")
		return reconcile.Result{}, nil
	case outcome == lock.Held:
		metrics.LockAcquisitions.WithLabelValues("held").Inc()
		log.V(1).Info("Change locked by another replica; looking again later")
		return reconcile.Result{RequeueAfter: r.Config.HeldRetry}, nil
	}
	metrics.LockAcquisitions.WithLabelValues("acquired").Inc()
	err = r.changeUsers(ctx, req)
	if rerr := held.Release(ctx, err == nil); rerr != nil {
		metrics.Errors.WithLabelValues("lock").Inc()
		log.Error(rerr, "Cannot release the lock of the change")
	}
	return reconcile.Result{}, err
}

func (r *Reconciler) changeUsers(ctx context.Context, req Request) error {
	log := ctrl.LoggerFrom(ctx)
	id := req.Kind + " " + req.Namespace + "/" + req.Name
	obj, err := r.Store.Get(req.Kind, req.Namespace, req.Name)
	if err != nil {
		return err
	}
	if obj == nil {
		log.V(1).Info("Changed, then deleted; nothing to do", "object", id)
		return nil
	}
	var changed []string
	if req.Created {
		log.V(1).Info("Created", "object", id)
	} else {
		changed = strings.Split(req.Keys, ",")
		metrics.ConfigChanges.WithLabelValues(req.Kind).Inc()
		log.Info(id+" changed, keys: "+req.Keys, "object", id, "keys", changed)
	}
	if optedOut, _ := plan.OptedOut(obj.GetAnnotations(), r.Config.Annotation); optedOut && !req.Created {
		// The users still get their record refreshed, without a restart,
		// so that the change never counts later.
		metrics.Skipped.WithLabelValues(plan.SkipConfigOptedOut).Inc()
		log.Info("Change restarts nothing: the object opted out", "object", id, "reason", plan.SkipConfigOptedOut)
	}

	users, err := r.Store.Users(refs.Kind(req.Kind), req.Namespace, req.Name)
	if err != nil {
		metrics.Errors.WithLabelValues("index").Inc()
		return err
	}
	ref := refs.Ref{Kind: refs.Kind(req.Kind), Name: req.Name}
	var errs []error
	for _, u := range users {
		key := workload.Key{Kind: u.Kind, Namespace: u.Obj.Namespace, Name: u.Obj.Name}
		if !req.Created {
			if reason := r.triage(u.Obj, ref.ID(), changed); reason != "" {
				metrics.Skipped.WithLabelValues(reason).Inc()
				log.V(1).Info("Change restarts nothing for this workload", "object", id, "workload", key.String(), "reason", reason)
				continue
			}
		}
		errs = append(errs, r.reconcileWorkload(ctrl.LoggerInto(ctx, log.WithValues("workload", key.String())), key))
	}
	return errors.Join(errs...)
}

func (r *Reconciler) triage(w client.Object, id string, changed []string) string {
	uses, err := workload.Refs(w)
	if err != nil {
		return "" // reported when reconciled
	}
	optedOut, _ := plan.OptedOut(w.GetAnnotations(), r.Config.Annotation) // reported when reconciled
	return plan.Triage(optedOut, uses, id, changed)
}
