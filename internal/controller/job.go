package controller

import (
	"context"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/note"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/workload"
)

// ReasonRecreateFailed is the Warning Event of a Job whose re-creation the
// API server refuses before it is deleted (RBAC, admission, validation),
// or that is too large to keep while it is re-created.
const ReasonRecreateFailed = "RecreateFailed"

// write sends what p decided for obj: one patch, or, for the restart of a
// kind whose template cannot be changed (a Job), its re-creation
// (recreate). It returns the workload as the write left it: the new Job
// after a re-creation.
func (r *Reconciler) write(ctx context.Context, key workload.Key, obj client.Object, p plan.Plan, s restart.Strategy, req guard.Request) (client.Object, error) {
	kind, _ := workload.ByName(key.Kind)
	if p.Action == plan.Restart && kind.Recreate {
		return r.recreate(ctx, key, obj, p, s, req)
	}
	patchType, patch := patchFor(obj, p, r.Config.Hasher.ID(), kind, s, r.guards.State(req, obj))
	if err := r.Client.Patch(ctx, obj, client.RawPatch(patchType, patch), restartOptions(s, p)...); err != nil {
		return obj, r.patchFailed(ctx, key, obj, err)
	}
	return obj, nil
}

// recreate restarts key, a Job, as Reloader does: the Job obj (decided
// on, read from the API server by jobFacts) is deleted, its pods in the
// background, and a Job built from its spec with the restart's patch
// (restart.RecreatedJob) is created under the same name, finished or not.
// The Job to create is kept in the cluster before the delete, and nothing
// waits for the deletion (restart.Recreator):
//
//	step                               on failure
//	create the new Job in dry-run,     refused: a Warning Event, not
//	  under a generated name (RBAC,    retried, and the Job is left as it
//	  admission and validation)        is
//	keep it (a record in watcher's     too large: a Warning Event, not
//	  namespace)                       retried; in progress: nothing now
//	delete the Job, conditioned on     a conflict (decide again) or gone
//	  its UID and resourceVersion
//	create the new Job                 being deleted (finalizers of its
//	                                   own) or failed: later, by
//	                                   resumeJob; the restart is made
//
// The new Job carries the record, so it is not restarted again for the
// same configuration, and the guards' state, bound to its UID once it
// exists. The restart counts in the guards once the Job is deleted,
// whether or not the new one exists yet.
func (r *Reconciler) recreate(ctx context.Context, key workload.Key, obj client.Object, p plan.Plan, s restart.Strategy, req guard.Request) (client.Object, error) {
	log := ctrl.LoggerFrom(ctx)
	old, ok := obj.(*batchv1.Job)
	if !ok { // jobFacts read it: never
		return obj, apierrors.NewConflict(batchv1.Resource("jobs"), key.Name, errors.New("the Job was not read from the API server"))
	}
	pt, patch := patchFor(old, p, r.Config.Hasher.ID(), workload.Job, s, "")
	job, err := restart.RecreatedJob(old, pt, patch)
	if err != nil {
		return obj, reconcile.TerminalError(err)
	}
	delete(job.Annotations, guard.StateAnnotation) // bound to the old UID
	if err := r.recreateAllowed(ctx, restart.NewRecreation(old, job, nil).New); err != nil {
		return obj, r.recreateFailed(ctx, key, old, "Cannot re-create the Job to restart it: ", err)
	}
	if r.recreations == nil {
		return obj, reconcile.TerminalError(fmt.Errorf("re-create %s: job re-creation not set up", key))
	}
	outcome, created, err := r.recreations.Begin(ctx, old, job, []byte(r.guards.State(req, &batchv1.Job{})))
	switch {
	case errors.Is(err, restart.ErrTooLarge):
		return obj, r.recreateFailed(ctx, key, old, "Cannot keep the Job while it is re-created: ", err)
	case errors.Is(err, restart.ErrInProgress):
		log.Info("A re-creation of the Job is in progress; deciding again once it is done")
		return obj, reconcile.TerminalError(fmt.Errorf("re-create %s: %w", key, err))
	case err != nil:
		return obj, fmt.Errorf("re-create %s: %w", key, err)
	case outcome == restart.Pending:
		log.Info("Job deleted to restart it; it is created again once its deletion is done", "oldUID", string(old.UID))
		return old, nil
	}
	log.V(1).Info("Job re-created", "oldUID", string(old.UID), "uid", string(created.UID))
	return created, nil
}

// recreateFailed reports a Job that cannot be re-created (it is not
// deleted) and returns the terminal error: trying again would fail alike.
func (r *Reconciler) recreateFailed(ctx context.Context, key workload.Key, old *batchv1.Job, why string, err error) error {
	metrics.Errors.WithLabelValues("create").Inc()
	ctrl.LoggerFrom(ctx).Error(err, "Cannot re-create the Job; not deleting it")
	r.Recorder.Eventf(old, nil, corev1.EventTypeWarning, ReasonRecreateFailed, "Restart", "%s", note.Truncate(why+err.Error()))
	return reconcile.TerminalError(fmt.Errorf("re-create %s: %w", key, err))
}

// jobFacts completes the decision p to restart key, a Job, with what only
// the API server knows of it (the store keeps neither its status nor its
// template): it reads the Job, unless obj was just read, and returns it to
// write with, and the plan:
//
//	the Job                                        plan
//	changed since the store's copy                 a conflict: decided again
//	being re-created (a record known)              none: decided again once
//	                                               it is done
//	being deleted                                  none
//	controlled (a CronJob's run)                   decided again as such:
//	                                               none, or its record removed
//	finished (Complete or Failed)                  decided again with its own
//	                                               annotations only: opting
//	                                               in through its pod template
//	                                               (a CronJob's jobTemplate
//	                                               does) does not run it again
//	running                                        p
//
// A Job with a controller is not restarted at all (plan.Input.Controlled,
// from the store; checked again here on the Job read).
func (r *Reconciler) jobFacts(ctx context.Context, key workload.Key, obj client.Object, in plan.Input, p plan.Plan) (client.Object, plan.Plan, error) {
	if kind, _ := workload.ByName(key.Kind); p.Action != plan.Restart || !kind.Recreate {
		return obj, p, nil
	}
	nn := types.NamespacedName{Namespace: key.Namespace, Name: key.Name}
	if r.recreations.Known(nn) {
		ctrl.LoggerFrom(ctx).V(1).Info("Job re-creation in progress; deciding once it is done")
		return obj, plan.Plan{Action: plan.None}, nil
	}
	job, ok := obj.(*batchv1.Job)
	if !ok {
		job = &batchv1.Job{}
		if err := r.Fresh.Get(ctx, nn, job); err != nil {
			metrics.Errors.WithLabelValues("get").Inc()
			return obj, p, fmt.Errorf("get %s: %w", key, err)
		}
		if job.UID != obj.GetUID() || job.ResourceVersion != obj.GetResourceVersion() {
			return obj, p, apierrors.NewConflict(batchv1.Resource("jobs"), key.Name, errors.New("the Job changed since it was read"))
		}
	}
	switch {
	case job.DeletionTimestamp != nil:
		return job, plan.Plan{Action: plan.None}, nil
	case workload.Job.Controlled(job):
		in.Controlled = true // whatever the store kept
		return job, plan.Decide(in), nil
	case jobFinished(job):
		in.Annotations = job.Annotations
		return job, plan.Decide(in), nil
	}
	return job, p, nil
}

// jobFinished tells whether a Job ran to its end: Complete or Failed.
func jobFinished(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// resumeJob carries on the re-creation of key, a Job being re-created or
// being deleted (restart.Recreator.Resume). ok says that it handled the
// request: the re-creation waits on the old Job's deletion (res says when
// to look again) or failed. Otherwise the Job is reconciled as usual.
func (r *Reconciler) resumeJob(ctx context.Context, key workload.Key) (res reconcile.Result, ok bool, err error) {
	if kind, _ := workload.ByName(key.Kind); !kind.Recreate || r.recreations == nil {
		return res, false, nil
	}
	nn := types.NamespacedName{Namespace: key.Namespace, Name: key.Name}
	cached := r.cached(key)
	if (cached == nil || cached.GetDeletionTimestamp() == nil) && !r.recreations.Known(nn) {
		if cached == nil {
			r.recreations.Gone(nn)
		}
		return res, false, nil
	}
	after, handled, err := r.recreations.Resume(ctx, nn)
	if err != nil || handled {
		return reconcile.Result{RequeueAfter: after}, true, err
	}
	return res, false, nil
}

// bindState returns the guards' state kept in a re-creation's record
// (encoded for no UID) bound to job, the Job created.
func (r *Reconciler) bindState(state []byte, job *batchv1.Job) string {
	sign := r.Config.Guards.Sign
	if sign == nil {
		return ""
	}
	st, err := guard.DecodeState(string(state), "", sign)
	if err != nil {
		return ""
	}
	return st.Encode(string(job.UID), sign)
}

// recreateAllowed asks the API server, in dry-run, whether it would
// create job (under a generated name: its own is still taken), so that a
// Job the API server would refuse is never deleted.
func (r *Reconciler) recreateAllowed(ctx context.Context, job *batchv1.Job) error {
	probe := job.DeepCopy()
	probe.GenerateName, probe.Name = job.Name+"-", ""
	return r.Client.Create(ctx, probe, client.DryRunAll)
}

// newRecreator returns the Job re-creator of r, keeping its records in
// cfg's namespace.
func newRecreator(r *Reconciler, cfg Config) *restart.Recreator {
	ns := cfg.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	rc := restart.NewRecreator(r.Client, r.Fresh, ns, r.Recorder)
	rc.Bind = r.bindState
	return rc
}
