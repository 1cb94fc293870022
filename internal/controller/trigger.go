package controller

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
	ReasonTriggerFailed = "TriggerFailed"
)

// InstantiateAnnotation marks a Job created from a CronJob outside its
// schedule, with the value "manual", as kubectl create job --from=cronjob/NAME
// does.
const InstantiateAnnotation = "cronjob.kubernetes.io/instantiate"

// trigger runs a CronJob just restarted for restartID at once, when
// Config.CronJobTrigger is on: it creates a Job from the CronJob's new
// template. obj is the CronJob as the restart patch returned it. Running
// Jobs are left alone, like the restart itself leaves them.
//
//	CronJob                                            what trigger does
//	not a CronJob, or the trigger is off               nothing
//	suspended                                          nothing: it is not to run
//	spec changed since the restart (generation moved)  nothing: the later
//	                                                   restart runs it
//	the Job of restartID exists (JobName)              nothing: success
//	else                                               creates the Job, Normal
//	                                                   Event JobCreated
//
// The Job's name comes from the CronJob's and restartID, so one restart never
// creates two Jobs, however often it is decided. trigger never fails the
// reconcile: the restart is written, and reconciling again would find nothing
// to do, so nothing would retry the Job. A failure is reported (log,
// watcher_errors_total{operation="trigger"}, Warning Event TriggerFailed).
func (r *Reconciler) trigger(ctx context.Context, key workload.Key, obj client.Object, restartID string) {
	if !r.Config.CronJobTrigger || key.Kind != workload.CronJob.Name() {
		return
	}
	log := ctrl.LoggerFrom(ctx)
	// The store keeps no template, and the patch answer of a stored workload
	// is its metadata: read the CronJob the restart wrote.
	cj := &batchv1.CronJob{}
	if err := r.Fresh.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: key.Name}, cj); err != nil {
		if apierrors.IsNotFound(err) {
			return
		}
		r.triggerFailed(ctx, obj, fmt.Errorf("get cronjob %s/%s: %w", key.Namespace, key.Name, err))
		return
	}
	if ptr.Deref(cj.Spec.Suspend, false) {
		log.Info("CronJob suspended; not creating a Job")
		return
	}
	// The spec is the one the restart wrote while its generation is: this
	// holds whatever the restart changed in the template.
	if cj.Generation != obj.GetGeneration() {
		log.V(1).Info("CronJob spec changed since the restart; not creating a Job", "generation", cj.Generation)
		return
	}
	job := jobFrom(cj, restartID)
	err := r.Client.Create(ctx, job)
	switch {
	case apierrors.IsAlreadyExists(err):
		log.V(1).Info("The Job of this restart exists already", "job", key.Namespace+"/"+job.Name)
	case err != nil:
		r.triggerFailed(ctx, obj, fmt.Errorf("create job %s/%s: %w", key.Namespace, job.Name, err))
	default:
		log.Info("Created a Job from the restarted CronJob", "job", key.Namespace+"/"+job.Name, "restartedFor", restartID)
		r.Recorder.Eventf(obj, job, corev1.EventTypeNormal, ReasonJobCreated, "Trigger", "Created Job %s from the new template", job.Name)
	}
}

func (r *Reconciler) triggerFailed(ctx context.Context, obj client.Object, err error) {
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
