package controller

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
)

// TestJobName: one restart, one name; long CronJob names are cut to a valid
// Job name that stays apart from other long names.
func TestJobName(t *testing.T) {
	const id = "0123456789abcdef"
	long := strings.Repeat("a", 52) // the longest CronJob name
	tests := []struct {
		cronJob, want string
	}{
		{"nightly", "nightly-watcher-0123456789"},
		{strings.Repeat("b", 44), strings.Repeat("b", 44) + "-watcher-0123456789"},
		{long, long[:37] + "-" + "6c1b3d" + "-watcher-0123456789"},
		{strings.Repeat("c", 36) + ".-x" + strings.Repeat("d", 13), strings.Repeat("c", 36) + "-a4c434-watcher-0123456789"},
	}
	for _, tt := range tests {
		got := JobName(tt.cronJob, id)
		if got != tt.want {
			t.Errorf("JobName(%s) = %s, want %s", tt.cronJob, got, tt.want)
		}
		if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
			t.Errorf("JobName(%s) = %s: %v", tt.cronJob, got, errs)
		}
	}
	if JobName(long, id) == JobName(long[:51]+"b", id) {
		t.Error("two long names share a Job name")
	}
	if JobName("a", id) == JobName("a", "fedcba9876543210") {
		t.Error("two restarts share a Job name")
	}
}

// TestJobFrom: the Job kubectl create job --from=cronjob/NAME makes.
func TestJobFrom(t *testing.T) {
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"watcher.dev/restarted-for": "0123456789abcdef"}},
		Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
	}
	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "nightly", UID: "uid-1", Labels: map[string]string{"cronjob-label": "not copied"}},
		Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *", JobTemplate: batchv1.JobTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"team": "a"}, Annotations: map[string]string{"note": "x"}},
			Spec:       batchv1.JobSpec{BackoffLimit: ptr.To[int32](2), Template: tmpl},
		}},
	}
	want := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   "shop",
			Name:        "nightly-watcher-0123456789",
			Labels:      map[string]string{"team": "a"},
			Annotations: map[string]string{"note": "x", "cronjob.kubernetes.io/instantiate": "manual"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "batch/v1", Kind: "CronJob", Name: "nightly", UID: "uid-1", Controller: ptr.To(true),
			}},
		},
		Spec: batchv1.JobSpec{BackoffLimit: ptr.To[int32](2), Template: tmpl},
	}
	got := jobFrom(cj, "0123456789abcdef")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("jobFrom (-want +got):\n%s", diff)
	}
	got.Spec.Template.Annotations["changed"] = "y"
	if _, ok := cj.Spec.JobTemplate.Spec.Template.Annotations["changed"]; ok {
		t.Error("the Job shares its template with the CronJob")
	}
}
