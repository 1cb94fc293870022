// Package trigger runs a CronJob at once when watcher restarts it
// (--cronjob-trigger): a Job from the CronJob's new template, as its
// concurrencyPolicy allows, instead of waiting for the next scheduled run.
package trigger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/note"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Event reasons of the CronJob trigger.
const (
	ReasonJobCreated    = "JobCreated"
	ReasonJobDeferred   = "JobDeferred"
	ReasonTriggerFailed = "TriggerFailed"
)

// InstantiateAnnotation marks a Job created from a CronJob outside its
// schedule, with the value "manual", as kubectl create job --from=cronjob/NAME
// does.
const InstantiateAnnotation = "cronjob.kubernetes.io/instantiate"

// Trigger creates the Jobs of restarted CronJobs. A nil Trigger does
// nothing (the trigger is off).
type Trigger struct {
	// Client writes Jobs (creates, and deletes for Replace).
	Client client.Client
	// Fresh reads from the API server, not a cache.
	Fresh client.Reader
	// Recorder sends the Events (JobCreated, JobDeferred, TriggerFailed).
	Recorder events.EventRecorder
}

// triggerAction is what the trigger does with a restarted CronJob.
type triggerAction int

const (
	// triggerNone: no Job, no Event.
	triggerNone triggerAction = iota
	// triggerCreate: create the Job of the restart.
	triggerCreate
	// triggerDefer: no Job; a Normal Event says the next scheduled run uses
	// the new template.
	triggerDefer
	// triggerReplace: delete the running Jobs, then create the Job of the
	// restart.
	triggerReplace
)

// triggerInput is what decideTrigger needs of a CronJob read from the API
// server after its restart.
type triggerInput struct {
	// Suspended is the CronJob's spec.suspend.
	Suspended bool
	// Moved is true when the CronJob's generation is no longer the one the
	// restart wrote: a later change of its spec.
	Moved bool
	// Policy is the CronJob's spec.concurrencyPolicy ("" is Allow).
	Policy batchv1.ConcurrencyPolicy
	// Running names the Jobs it runs: those of its status.active (read
	// with the CronJob from the API server), but the Job of this restart;
	// for Replace, only those a read of each Job confirms (runningJobs).
	Running []string
}

// decideTrigger decides what the trigger does, as the CronJob controller
// starts a run that is due now (its concurrencyPolicy):
//
//	CronJob                                       action
//	suspended                                     none: it is not to run
//	spec changed since the restart                none: the later restart
//	                                              runs it
//	no Job running                                create
//	concurrencyPolicy Allow (or unset)            create, beside the running
//	                                              Jobs
//	concurrencyPolicy Forbid, a Job running       defer: no Job; the next
//	                                              scheduled run uses the new
//	                                              template
//	concurrencyPolicy Replace, a Job running      replace: delete the running
//	                                              Jobs, then create
func decideTrigger(in triggerInput) triggerAction {
	switch {
	case in.Suspended, in.Moved:
		return triggerNone
	case len(in.Running) == 0:
		return triggerCreate
	case in.Policy == batchv1.ForbidConcurrent:
		return triggerDefer
	case in.Policy == batchv1.ReplaceConcurrent:
		return triggerReplace
	default:
		return triggerCreate
	}
}

// Run runs a CronJob just restarted for restartID at once: it creates a Job from the CronJob's new
// template, as its concurrencyPolicy allows (decideTrigger). obj is the
// CronJob as the restart patch returned it. The CronJob is read again from
// the API server, so that its status.active (the Jobs the CronJob controller
// started and still runs) is current.
//
// The Job's name comes from the CronJob's and restartID, so one restart never
// creates two Jobs, however often it is decided. trigger never fails the
// reconcile: the restart is written, and reconciling again would find nothing
// to do, so nothing would retry the Job. A failure is reported (log,
// watcher_errors_total{operation="trigger"}, Warning Event TriggerFailed).
func (r *Trigger) Run(ctx context.Context, key workload.Key, obj client.Object, restartID string) {
	if r == nil || key.Kind != workload.CronJob.Name() {
		return
	}
	log := ctrl.LoggerFrom(ctx)
	// The store keeps no template and no status, and the patch answer of a
	// stored workload is its metadata: read the CronJob the restart wrote.
	cj := &batchv1.CronJob{}
	if err := r.Fresh.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: key.Name}, cj); err != nil {
		if apierrors.IsNotFound(err) {
			return
		}
		r.triggerFailed(ctx, obj, fmt.Errorf("get cronjob %s/%s: %w", key.Namespace, key.Name, err))
		return
	}
	job := jobFrom(cj, restartID)
	in, running, err := r.triggerInputOf(ctx, cj, obj.GetGeneration(), job.Name)
	if err != nil {
		r.triggerFailed(ctx, obj, err)
		return
	}
	switch decideTrigger(in) {
	case triggerNone:
		log.V(1).Info("Not creating a Job from the restarted CronJob", "suspended", in.Suspended, "generation", cj.Generation)
		return
	case triggerDefer:
		log.Info("CronJob forbids concurrent runs and a Job is running; not creating a Job", "running", jobNames(in.Running))
		r.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, ReasonJobDeferred, "Trigger",
			"%s", note.Truncate("No Job created now: concurrencyPolicy Forbid and Job "+jobNames(in.Running)+" running; the next scheduled run uses the new template"))
		return
	case triggerReplace:
		if err := r.deleteRunning(ctx, running); err != nil {
			r.triggerFailed(ctx, obj, err)
			return
		}
	}
	err = r.Client.Create(ctx, job)
	switch {
	case apierrors.IsAlreadyExists(err):
		log.V(1).Info("The Job of this restart exists already", "job", key.Namespace+"/"+job.Name)
	case err != nil:
		r.triggerFailed(ctx, obj, fmt.Errorf("create job %s/%s: %w", key.Namespace, job.Name, err))
	default:
		msg := "Created Job " + job.Name + " from the new template"
		switch {
		case len(in.Running) == 0:
		case in.Policy == batchv1.ReplaceConcurrent:
			msg += ", replacing Job " + jobNames(in.Running) + " (concurrencyPolicy Replace)"
		default:
			msg += ", beside running Job " + jobNames(in.Running) + " (concurrencyPolicy Allow)"
		}
		log.Info("Created a Job from the restarted CronJob", "job", key.Namespace+"/"+job.Name, "restartedFor", restartID, "running", len(in.Running))
		r.Recorder.Eventf(obj, job, corev1.EventTypeNormal, ReasonJobCreated, "Trigger", "%s", note.Truncate(msg))
	}
}

// triggerInputOf gathers decideTrigger's input from cj, read from the API
// server after the restart that wrote generation and names its Job own.
// For Replace, it also returns the running Jobs to delete.
func (r *Trigger) triggerInputOf(ctx context.Context, cj *batchv1.CronJob, generation int64, own string) (triggerInput, []*batchv1.Job, error) {
	in := triggerInput{Suspended: ptr.Deref(cj.Spec.Suspend, false), Moved: cj.Generation != generation, Policy: cj.Spec.ConcurrencyPolicy}
	for _, a := range cj.Status.Active {
		if a.Name != own {
			in.Running = append(in.Running, a.Name)
		}
	}
	if decideTrigger(in) != triggerReplace {
		return in, nil, nil
	}
	// Replace deletes what runs: only Jobs read from the API server, still
	// running and controlled by this CronJob.
	running, err := r.runningJobs(ctx, cj, in.Running)
	if err != nil {
		return in, nil, err
	}
	in.Running = nil
	for _, j := range running {
		in.Running = append(in.Running, j.Name)
	}
	return in, running, nil
}

// runningJobs returns the Jobs of names (cj's status.active) that still
// run, each read from the API server: the CronJob controller may not have
// removed a finished or deleted Job yet, and a Job not controlled by cj is
// not its run. A Job that cannot be read is an error: nothing is deleted
// without knowing.
func (r *Trigger) runningJobs(ctx context.Context, cj *batchv1.CronJob, names []string) ([]*batchv1.Job, error) {
	var out []*batchv1.Job
	for _, name := range names {
		// status.active names Jobs of the CronJob's namespace; whatever
		// else it might say, no other namespace is read.
		job := &batchv1.Job{}
		err := r.Fresh.Get(ctx, types.NamespacedName{Namespace: cj.Namespace, Name: name}, job)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("get job %s/%s of cronjob %s: %w", cj.Namespace, name, cj.Name, err)
		}
		if metav1.IsControlledBy(job, cj) && !jobFinished(job) {
			out = append(out, job)
		}
	}
	return out, nil
}

// jobFinished tells whether a Job has completed or failed.
func jobFinished(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// deleteRunning deletes the running Jobs of a Replace CronJob, as the
// CronJob controller does (in the background: the garbage collector deletes
// their pods), each only while it is the Job that was read.
func (r *Trigger) deleteRunning(ctx context.Context, jobs []*batchv1.Job) error {
	for _, job := range jobs {
		err := r.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: ptr.To(job.UID)})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete job %s/%s (concurrencyPolicy Replace): %w", job.Namespace, job.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("Deleted a running Job of the CronJob (concurrencyPolicy Replace)", "job", job.Namespace+"/"+job.Name)
	}
	return nil
}

// jobNames lists names, comma-separated.
func jobNames(names []string) string { return strings.Join(names, ", ") }

func (r *Trigger) triggerFailed(ctx context.Context, obj client.Object, err error) {
	metrics.Errors.WithLabelValues("trigger").Inc()
	ctrl.LoggerFrom(ctx).Error(err, "Cannot create a Job from the restarted CronJob")
	r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonTriggerFailed, "Trigger", "%s", note.Truncate("Restarted, but no Job created now: "+err.Error()))
}

// jobFrom returns the Job that kubectl create job --from=cronjob/NAME would
// create from cj, named JobName(cj.Name, restartID): the labels, annotations
// and spec of its jobTemplate, InstantiateAnnotation "manual", and cj as its
// controller. Like kubectl, the owner reference does not block the owner's
// deletion, which would need the cronjobs/finalizers permission.
func jobFrom(cj *batchv1.CronJob, restartID string) *batchv1.Job {
	annotations := map[string]string{InstantiateAnnotation: "manual"}
	for k, v := range cj.Spec.JobTemplate.Annotations {
		annotations[k] = v
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   cj.Namespace,
			Name:        JobName(cj.Name, restartID),
			Labels:      cj.Spec.JobTemplate.Labels,
			Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: batchv1.SchemeGroupVersion.String(),
				Kind:       workload.CronJob.Name(),
				Name:       cj.Name,
				UID:        cj.UID,
				Controller: ptr.To(true),
			}},
		},
		Spec: *cj.Spec.JobTemplate.Spec.DeepCopy(),
	}
}

// maxJobName is the longest Job name: the Job's pods carry it as a label
// value.
const maxJobName = 63

// JobName names the Job of one restart of CronJob cronJob:
// "<cronJob>-watcher-<first 10 characters of restartID>". A CronJob name too
// long for that is cut, and a short hash of the whole name added, so that
// two long names never share their Jobs' names.
func JobName(cronJob, restartID string) string {
	suffix := "-watcher-" + restartID[:min(10, len(restartID))]
	if len(cronJob)+len(suffix) <= maxJobName {
		return cronJob + suffix
	}
	sum := sha256.Sum256([]byte(cronJob))
	tag := "-" + hex.EncodeToString(sum[:3])
	head := strings.TrimRight(cronJob[:maxJobName-len(suffix)-len(tag)], "-.")
	return head + tag + suffix
}
