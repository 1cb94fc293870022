package trigger

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/watcher-dev/watcher/internal/workload"
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

// TestDecideTrigger: one row per line of decideTrigger's table.
func TestDecideTrigger(t *testing.T) {
	running := []string{"backup-29000000"}
	tests := []struct {
		name string
		in   triggerInput
		want triggerAction
	}{
		{"suspended", triggerInput{Suspended: true}, triggerNone},
		{"suspended, Forbid, running", triggerInput{Suspended: true, Policy: batchv1.ForbidConcurrent, Running: running}, triggerNone},
		{"spec changed since", triggerInput{Moved: true}, triggerNone},
		{"nothing running", triggerInput{}, triggerCreate},
		{"Forbid, nothing running", triggerInput{Policy: batchv1.ForbidConcurrent}, triggerCreate},
		{"Replace, nothing running", triggerInput{Policy: batchv1.ReplaceConcurrent}, triggerCreate},
		{"unset, running", triggerInput{Running: running}, triggerCreate},
		{"Allow, running", triggerInput{Policy: batchv1.AllowConcurrent, Running: running}, triggerCreate},
		{"Forbid, running", triggerInput{Policy: batchv1.ForbidConcurrent, Running: running}, triggerDefer},
		{"Replace, running", triggerInput{Policy: batchv1.ReplaceConcurrent, Running: running}, triggerReplace},
	}
	for _, tt := range tests {
		if got := decideTrigger(tt.in); got != tt.want {
			t.Errorf("%s: decideTrigger(%+v) = %v, want %v", tt.name, tt.in, got, tt.want)
		}
	}
}

// TestTriggerConcurrencyPolicy: the trigger starts the run a CronJob's
// concurrencyPolicy allows, reading the CronJob (and, for Replace, its
// running Jobs) from the API server: with Forbid and a Job running, no Job
// and a Normal Event; with Replace, the running Job is deleted and the new
// one created; with Allow, the new one runs beside it.
func TestTriggerConcurrencyPolicy(t *testing.T) {
	const id = "0123456789abcdef"
	const scheduled, ours = "backup-29000000", "backup-watcher-0123456789"
	tests := []struct {
		name     string
		policy   batchv1.ConcurrencyPolicy
		active   bool     // status.active names the scheduled Job
		finished bool     // which has completed already
		jobs     []string // the Jobs after the trigger
		event    string
	}{
		{"Forbid, a Job running", batchv1.ForbidConcurrent, true, false, []string{scheduled},
			"Normal JobDeferred No Job created now: concurrencyPolicy Forbid and Job backup-29000000 running; the next scheduled run uses the new template"},
		{"Forbid, nothing running", batchv1.ForbidConcurrent, false, false, []string{scheduled, ours},
			"Normal JobCreated Created Job backup-watcher-0123456789 from the new template"},
		{"Replace, a Job running", batchv1.ReplaceConcurrent, true, false, []string{ours},
			"Normal JobCreated Created Job backup-watcher-0123456789 from the new template, replacing Job backup-29000000 (concurrencyPolicy Replace)"},
		{"Replace, the active Job finished", batchv1.ReplaceConcurrent, true, true, []string{scheduled, ours},
			"Normal JobCreated Created Job backup-watcher-0123456789 from the new template"},
		{"Replace, nothing running", batchv1.ReplaceConcurrent, false, false, []string{scheduled, ours},
			"Normal JobCreated Created Job backup-watcher-0123456789 from the new template"},
		{"Allow, a Job running", batchv1.AllowConcurrent, true, false, []string{scheduled, ours},
			"Normal JobCreated Created Job backup-watcher-0123456789 from the new template, beside running Job backup-29000000 (concurrencyPolicy Allow)"},
		{"unset, a Job running", "", true, false, []string{scheduled, ours},
			"Normal JobCreated Created Job backup-watcher-0123456789 from the new template, beside running Job backup-29000000 (concurrencyPolicy Allow)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			cj := &batchv1.CronJob{
				ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "backup", UID: "cj-uid", Generation: 4},
				Spec: batchv1.CronJobSpec{Schedule: "0 * * * *", ConcurrencyPolicy: tt.policy,
					JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "app", Image: "backup:1"}}}}}}},
			}
			job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: scheduled, UID: "job-uid",
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: "backup", UID: "cj-uid", Controller: ptr.To(true)}}}}
			if tt.finished {
				job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
			}
			if tt.active {
				cj.Status.Active = []corev1.ObjectReference{{Kind: "Job", Namespace: "shop", Name: scheduled, UID: "job-uid"}}
			}
			c := fake.NewClientBuilder().WithObjects(cj.DeepCopy(), job).WithStatusSubresource(cj).Build()
			rec := events.NewFakeRecorder(10)
			r := &Trigger{Client: c, Fresh: c, Recorder: rec}
			r.Run(ctx, workload.Key{Kind: "CronJob", Namespace: "shop", Name: "backup"}, cj, id)

			var jobs batchv1.JobList
			if err := c.List(ctx, &jobs); err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, j := range jobs.Items {
				names = append(names, j.Name)
			}
			slices.Sort(names)
			if !slices.Equal(names, tt.jobs) {
				t.Errorf("Jobs after the trigger: %v, want %v", names, tt.jobs)
			}
			select {
			case e := <-rec.Events:
				if e != tt.event {
					t.Errorf("Event %q, want %q", e, tt.event)
				}
			default:
				t.Errorf("no Event, want %q", tt.event)
			}
		})
	}
}
