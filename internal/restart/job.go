package restart

import (
	"encoding/json"
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// The labels the API server generates on a Job whose selector it
// generates (spec.manualSelector unset): on the pod template, and in
// spec.selector, the Job's UID and name, under the current keys and the
// legacy ones.
var generatedJobLabels = []string{
	batchv1.ControllerUidLabel, "controller-uid",
	batchv1.JobNameLabel, "job-name",
}

// RecreatedJob returns the Job that replaces old to restart it: a Job's pod
// template cannot be changed, so a restart deletes the Job and creates
// this one, under the same name, as Reloader does (its ReCreateJobFromjob).
// It is old with the restart's patch applied (pt and patch, built as for
// any kind: the record annotations and the strategy's change of the pod
// template), less what the API server made for old:
//
//	field                                 in the new Job
//	uid, resourceVersion, generation,     cleared
//	  creationTimestamp, deletion fields,
//	  managedFields
//	finalizers foregroundDeletion, orphan removed (old's deletion's own)
//	status                                cleared
//	spec.selector                         cleared, so that the API server
//	                                      generates it for the new UID;
//	                                      kept with spec.manualSelector
//	template labels controller-uid,       removed (generated for old);
//	  batch.kubernetes.io/controller-uid,  kept with spec.manualSelector
//	  job-name, batch.kubernetes.io/
//	  job-name
//	labels controller-uid,                removed when they name old's UID
//	  batch.kubernetes.io/controller-uid
//	ownerReferences                       kept, without blockOwnerDeletion
//	                                      (setting it needs the right to
//	                                      update the owner's finalizers;
//	                                      kubectl create job --from sets
//	                                      none either)
//	everything else (labels, annotations, kept, so a finished Job runs
//	  spec)                               again, as Reloader's does
//
// Reloader drops the selector even with spec.manualSelector, which the API
// server then refuses; here such a Job keeps the selector and labels its
// owner wrote. A merge patch of maps only (every strategy's for a Job)
// merges alike as a strategic merge patch, which applies both types.
func RecreatedJob(old *batchv1.Job, pt types.PatchType, patch []byte) (*batchv1.Job, error) {
	if pt != types.MergePatchType && pt != types.StrategicMergePatchType {
		return nil, fmt.Errorf("re-create job %s/%s: patch type %s not supported", old.Namespace, old.Name, pt)
	}
	doc, err := json.Marshal(old)
	if err != nil {
		return nil, fmt.Errorf("re-create job %s/%s: %w", old.Namespace, old.Name, err)
	}
	doc, err = strategicpatch.StrategicMergePatch(doc, patch, &batchv1.Job{})
	if err != nil {
		return nil, fmt.Errorf("re-create job %s/%s: apply the restart: %w", old.Namespace, old.Name, err)
	}
	job := &batchv1.Job{}
	if err := json.Unmarshal(doc, job); err != nil {
		return nil, fmt.Errorf("re-create job %s/%s: %w", old.Namespace, old.Name, err)
	}
	job.ObjectMeta = metav1.ObjectMeta{
		Name: old.Name, Namespace: old.Namespace, GenerateName: job.GenerateName,
		Labels: job.Labels, Annotations: job.Annotations, OwnerReferences: job.OwnerReferences,
		Finalizers: slices.DeleteFunc(job.Finalizers, func(f string) bool {
			return f == metav1.FinalizerDeleteDependents || f == metav1.FinalizerOrphanDependents
		}),
	}
	for i := range job.OwnerReferences {
		job.OwnerReferences[i].BlockOwnerDeletion = nil
	}
	for _, k := range []string{batchv1.ControllerUidLabel, "controller-uid"} {
		if v, ok := job.Labels[k]; ok && v == string(old.UID) {
			delete(job.Labels, k)
		}
	}
	job.Status = batchv1.JobStatus{}
	if job.Spec.ManualSelector == nil || !*job.Spec.ManualSelector {
		job.Spec.Selector = nil
		for _, k := range generatedJobLabels {
			delete(job.Spec.Template.Labels, k)
		}
	}
	return job, nil
}
