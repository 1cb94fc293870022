package restart_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/workload"
)

// finishedJob is a Job as the API server returns it once it ran: its
// selector and template labels generated from its UID, its status filled.
func finishedJob() *batchv1.Job {
	const uid = "0f6b4a8e-old"
	generated := map[string]string{
		batchv1.ControllerUidLabel: uid, "controller-uid": uid,
		batchv1.JobNameLabel: "migrate", "job-name": "migrate",
	}
	tmplLabels := map[string]string{"app": "migrate"}
	for k, v := range generated {
		tmplLabels[k] = v
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "shop", Name: "migrate", UID: uid, ResourceVersion: "42", Generation: 1,
			CreationTimestamp: metav1.NewTime(time.Unix(1e9, 0)),
			Labels:            map[string]string{"app": "migrate", "team": "a"},
			Annotations:       map[string]string{"reloader.stakater.com/auto": "true", plan.RecordAnnotation: "old"},
			Finalizers:        []string{"example.com/keep", metav1.FinalizerDeleteDependents},
			ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](2),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: uid}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: tmplLabels, Annotations: map[string]string{"note": "kept"}},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
					Name: "app", Image: "migrate:1", Env: []corev1.EnvVar{{Name: "MODE", Value: "all"}},
				}}},
			},
		},
		Status: batchv1.JobStatus{Succeeded: 1, CompletionTime: ptr.To(metav1.NewTime(time.Unix(1e9+60, 0)))},
	}
}

// restartPatch is the patch the controller builds for a restart of a Job
// with strategy s: the record annotations and the strategy's change.
func restartPatch(t *testing.T, s restart.Strategy) (types.PatchType, []byte) {
	t.Helper()
	pt, at := restart.Patch(s, restart.Workload{Kind: workload.Job, Object: finishedJob(), ID: "abc123"})
	patch := map[string]any{"metadata": map[string]any{"resourceVersion": "42", "annotations": map[string]any{plan.RecordAnnotation: "new"}}}
	for k, v := range at {
		patch[k] = v
	}
	b, err := json.Marshal(patch)
	if err != nil {
		t.Fatal(err)
	}
	return pt, b
}

// TestRecreatedJob: the Job that replaces a finished one keeps what its
// owner wrote (labels, annotations, finalizers, spec), carries the
// restart's patch (the new record, the strategy's mark), and has nothing
// the API server made for the old one: no UID, resourceVersion, status,
// generated selector or generated template labels.
func TestRecreatedJob(t *testing.T) {
	old := finishedJob()
	pt, patch := restartPatch(t, restart.Annotation{})
	job, err := restart.RecreatedJob(old, pt, patch)
	if err != nil {
		t.Fatal(err)
	}
	want := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "shop", Name: "migrate",
			Labels:      map[string]string{"app": "migrate", "team": "a"},
			Annotations: map[string]string{"reloader.stakater.com/auto": "true", plan.RecordAnnotation: "new"},
			Finalizers:  []string{"example.com/keep"},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](2),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "migrate"},
					Annotations: map[string]string{"note": "kept", plan.RestartAnnotation: "abc123"}},
				Spec: old.Spec.Template.Spec,
			},
		},
	}
	if d := cmp.Diff(want, job); d != "" {
		t.Errorf("re-created Job (-want +got):\n%s", d)
	}
	if old.Spec.Selector == nil || old.Annotations[plan.RecordAnnotation] != "old" || old.Status.Succeeded != 1 {
		t.Error("the old Job was changed")
	}
}

// TestRecreatedJobEnv: the env strategy's strategic merge patch adds its
// variable to the container, keeping the container's own.
func TestRecreatedJobEnv(t *testing.T) {
	pt, patch := restartPatch(t, restart.Env{})
	job, err := restart.RecreatedJob(finishedJob(), pt, patch)
	if err != nil {
		t.Fatal(err)
	}
	if len(job.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("containers %+v", job.Spec.Template.Spec.Containers)
	}
	got := map[string]string{}
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		got[e.Name] = e.Value
	}
	if d := cmp.Diff(map[string]string{"MODE": "all", "WATCHER_CONFIG_HASH": "abc123"}, got); d != "" {
		t.Errorf("env (-want +got):\n%s", d)
	}
}

// TestRecreatedJobManualSelector: a Job whose owner wrote its selector
// (spec.manualSelector) keeps it and its template labels: the API server
// generates none for it, and refuses it without a selector.
func TestRecreatedJobManualSelector(t *testing.T) {
	old := finishedJob()
	old.Spec.ManualSelector = ptr.To(true)
	old.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "migrate", "job-name": "migrate"}}
	pt, patch := restartPatch(t, restart.Annotation{})
	job, err := restart.RecreatedJob(old, pt, patch)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(old.Spec.Selector, job.Spec.Selector); d != "" {
		t.Errorf("selector (-want +got):\n%s", d)
	}
	if d := cmp.Diff(old.Spec.Template.Labels, job.Spec.Template.Labels); d != "" {
		t.Errorf("template labels (-want +got):\n%s", d)
	}
}

// TestRecreatedJobLabels: labels of the Job itself that name the old
// Job's UID are dropped; others under those keys are the owner's.
func TestRecreatedJobLabels(t *testing.T) {
	old := finishedJob()
	old.Labels[batchv1.ControllerUidLabel] = string(old.UID)
	old.Labels["controller-uid"] = "set-by-a-person"
	pt, patch := restartPatch(t, restart.Annotation{})
	job, err := restart.RecreatedJob(old, pt, patch)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := job.Labels[batchv1.ControllerUidLabel]; ok {
		t.Errorf("labels %v keep the old UID", job.Labels)
	}
	if job.Labels["controller-uid"] != "set-by-a-person" {
		t.Errorf("labels %v lost the owner's", job.Labels)
	}
}

// TestRecreatedJobPatchType: a patch type that cannot be applied here (a
// JSON patch) is an error, not a Job without its restart.
func TestRecreatedJobPatchType(t *testing.T) {
	if _, err := restart.RecreatedJob(finishedJob(), types.JSONPatchType, []byte(`[]`)); err == nil {
		t.Error("no error for a JSON patch")
	}
}

// TestRecreatedJobOwner: a Job of a CronJob keeps its owner, without
// blockOwnerDeletion, which only the owner's finalizers right may set.
func TestRecreatedJobOwner(t *testing.T) {
	old := finishedJob()
	owner := metav1.OwnerReference{APIVersion: "batch/v1", Kind: "CronJob", Name: "nightly", UID: "cj-uid", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	old.OwnerReferences = []metav1.OwnerReference{owner}
	pt, patch := restartPatch(t, restart.Annotation{})
	job, err := restart.RecreatedJob(old, pt, patch)
	if err != nil {
		t.Fatal(err)
	}
	owner.BlockOwnerDeletion = nil
	if d := cmp.Diff([]metav1.OwnerReference{owner}, job.OwnerReferences); d != "" {
		t.Errorf("owner references (-want +got):\n%s", d)
	}
	if old.OwnerReferences[0].BlockOwnerDeletion == nil {
		t.Error("the old Job was changed")
	}
}
