package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
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
// API server refuses before it is deleted (RBAC, admission, validation).
const ReasonRecreateFailed = "RecreateFailed"

// recreateWait bounds the wait for the name of a deleted Job to be free
// (the Job may linger while finalizers of its own run).
const recreateWait = 30 * time.Second

// kindOf returns the workload kind of obj; the zero Kind for none.
func kindOf(obj client.Object) workload.Kind {
	k, _ := workload.Of(obj)
	return k
}

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
// on) is deleted, its pods in the background, and a Job built from its
// spec with the restart's patch (restart.RecreatedJob) is created under
// the same name, finished or not. Every step is guarded:
//
//	step                               on failure
//	read the Job from the API server   its resourceVersion is not obj's:
//	                                   a conflict (decide again)
//	create the new Job in dry-run,     refused: a Warning Event, not
//	  under a generated name (RBAC,    retried, and the Job is left as it
//	  admission and validation)        is
//	delete the Job, conditioned on     a conflict (decide again) or gone
//	  its UID and resourceVersion
//	create the new Job                 its name still taken: tried again
//	                                   for recreateWait
//	record the guards' state on it     logged; the restart stands
//
// The new Job carries the record, so it is not restarted again for the
// same configuration; the guards' state is bound to its UID, so it is
// written once the Job exists.
func (r *Reconciler) recreate(ctx context.Context, key workload.Key, obj client.Object, p plan.Plan, s restart.Strategy, req guard.Request) (client.Object, error) {
	log := ctrl.LoggerFrom(ctx)
	old := &batchv1.Job{}
	if err := r.Fresh.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: key.Name}, old); err != nil {
		metrics.Errors.WithLabelValues("get").Inc()
		return obj, fmt.Errorf("get %s: %w", key, err)
	}
	if old.UID != obj.GetUID() || old.ResourceVersion != obj.GetResourceVersion() {
		return obj, apierrors.NewConflict(batchv1.Resource("jobs"), key.Name, errors.New("the Job changed since it was read"))
	}
	pt, patch := patchFor(old, p, r.Config.Hasher.ID(), workload.Job, s, "")
	job, err := restart.RecreatedJob(old, pt, patch)
	if err != nil {
		return obj, reconcile.TerminalError(err)
	}
	delete(job.Annotations, guard.StateAnnotation) // bound to the old UID
	if err := r.recreateAllowed(ctx, job); err != nil {
		metrics.Errors.WithLabelValues("create").Inc()
		log.Error(err, "The API server refuses the re-created Job; not deleting the Job")
		r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonRecreateFailed, "Restart", "%s", note.Truncate("Cannot re-create the Job to restart it: "+err.Error()))
		return obj, reconcile.TerminalError(fmt.Errorf("re-create %s: %w", key, err))
	}
	uid, rv := old.UID, old.ResourceVersion
	err = r.Client.Delete(ctx, old, client.PropagationPolicy(metav1.DeletePropagationBackground),
		client.Preconditions{UID: &uid, ResourceVersion: &rv})
	if err != nil {
		return obj, fmt.Errorf("delete %s: %w", key, err)
	}
	if err := r.createJob(ctx, job); err != nil {
		metrics.Errors.WithLabelValues("create").Inc()
		log.Error(err, "Job deleted to restart it, but not created again", "job", key.Namespace+"/"+key.Name)
		r.Recorder.Eventf(old, nil, corev1.EventTypeWarning, ReasonRecreateFailed, "Restart", "%s", note.Truncate("Deleted to restart it, but not created again: "+err.Error()))
		return obj, reconcile.TerminalError(fmt.Errorf("create %s: %w", key, err))
	}
	log.V(1).Info("Job re-created", "oldUID", string(uid), "uid", string(job.UID))
	if state := r.guards.State(req, job); state != "" {
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{guard.StateAnnotation: state}}})
		if err := r.Client.Patch(ctx, job, client.RawPatch(types.MergePatchType, b)); err != nil {
			metrics.Errors.WithLabelValues("patch").Inc()
			log.Error(err, "Cannot record the restart state on the re-created Job")
		}
	}
	return job, nil
}

// recreateAllowed asks the API server, in dry-run, whether it would
// create job (under a generated name: its own is still taken), so that a
// Job the API server would refuse is never deleted.
func (r *Reconciler) recreateAllowed(ctx context.Context, job *batchv1.Job) error {
	probe := job.DeepCopy()
	probe.GenerateName, probe.Name = job.Name+"-", ""
	return r.Client.Create(ctx, probe, client.DryRunAll)
}

// createJob creates job, trying again while its name is still taken by
// the Job just deleted. job is then the Job created.
func (r *Reconciler) createJob(ctx context.Context, job *batchv1.Job) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, recreateWait, true, func(ctx context.Context) (bool, error) {
		created := job.DeepCopy()
		if last = r.Client.Create(ctx, created); apierrors.IsAlreadyExists(last) {
			return false, nil
		}
		*job = *created
		return true, last
	})
	if err != nil && last != nil {
		return last
	}
	return err
}
