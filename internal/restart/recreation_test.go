package restart_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watcher-dev/watcher/internal/restart"
)

// recreation is the re-creation of finishedJob (UID "0f6b4a8e-old").
func recreation(t *testing.T) restart.Recreation {
	t.Helper()
	old := finishedJob()
	pt, patch := restartPatch(t, restart.Annotation{})
	job, err := restart.RecreatedJob(old, pt, patch)
	if err != nil {
		t.Fatal(err)
	}
	return restart.NewRecreation(old, job, []byte("state"))
}

// TestNextStep: one case per row of NextStep's table.
func TestNextStep(t *testing.T) {
	rc := recreation(t)
	created := rc
	created.Created = true
	old := finishedJob()
	deleting := finishedJob()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1e9, 0)}
	mine := rc.New.DeepCopy()
	mine.UID = "new"
	released := mine.DeepCopy()
	released.Finalizers = nil
	other := finishedJob()
	other.UID = "someone-else"
	other.Annotations = nil
	tests := []struct {
		name string
		rc   restart.Recreation
		cur  *batchv1.Job
		want restart.Step
	}{
		{"pending, no Job: create", rc, nil, restart.StepCreate},
		{"pending, the old Job: delete", rc, old, restart.StepDelete},
		{"pending, the old Job being deleted: wait", rc, deleting, restart.StepWait},
		{"pending, the new Job: mark", rc, mine, restart.StepMark},
		{"pending, the new Job released: mark", rc, released, restart.StepMark},
		{"pending, another Job: abandon", rc, other, restart.StepAbandon},
		{"created, the new Job with the finalizer: release", created, mine, restart.StepRelease},
		{"created, the new Job released: drop", created, released, restart.StepDrop},
		{"created, no Job (it ran and was removed): drop, never create", created, nil, restart.StepDrop},
		{"created, another Job: drop", created, other, restart.StepDrop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := restart.NextStep(tt.rc, tt.cur); got != tt.want {
				t.Errorf("NextStep() = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestNewRecreation: the Job to create is marked with the old Job's UID
// and holds watcher's finalizer; the old Job is not changed.
func TestNewRecreation(t *testing.T) {
	rc := recreation(t)
	if got := rc.New.Annotations[restart.RecreatedFromAnnotation]; got != "0f6b4a8e-old" {
		t.Errorf("marked %q, want the old UID", got)
	}
	if want := []string{"example.com/keep", restart.RecreationFinalizer}; !cmp.Equal(rc.New.Finalizers, want) {
		t.Errorf("finalizers %v, want %v", rc.New.Finalizers, want)
	}
	if rc.OldUID != "0f6b4a8e-old" || rc.OldVersion != "42" || rc.Job.String() != "shop/migrate" {
		t.Errorf("recreation of %s %s %s", rc.Job, rc.OldUID, rc.OldVersion)
	}
}

// TestRecordRoundTrip: a record reads back as written, in both states; it
// is named for its Job alone and labelled to be listed.
func TestRecordRoundTrip(t *testing.T) {
	for _, created := range []bool{false, true} {
		rc := recreation(t)
		rc.Created = created
		cm, err := rc.Record("watcher")
		if err != nil {
			t.Fatal(err)
		}
		if cm.Namespace != "watcher" || cm.Name != restart.RecordName("shop", "migrate") || cm.Labels[restart.RecreationLabel] != "true" {
			t.Errorf("record %s/%s labels %v", cm.Namespace, cm.Name, cm.Labels)
		}
		got, err := restart.FromRecord(cm)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(rc, got); diff != "" {
			t.Errorf("read back (-want +got):\n%s", diff)
		}
	}
	if restart.RecordName("a", "b-c") == restart.RecordName("a-b", "c") {
		t.Error("two Jobs share a record name")
	}
	if n := restart.RecordName(strings.Repeat("n", 63), strings.Repeat("j", 63)); len(n) > 63 {
		t.Errorf("record name %q too long", n)
	}
}

// TestRecordBounded: a Job over MaxRecreationBytes is not kept (ErrTooLarge)
// and a record over it is not read; a record naming no Job, or whose Job
// is another, is refused.
func TestRecordBounded(t *testing.T) {
	rc := recreation(t)
	rc.New.Spec.Template.Annotations["big"] = strings.Repeat("x", restart.MaxRecreationBytes)
	if _, err := rc.Record("watcher"); !errors.Is(err, restart.ErrTooLarge) {
		t.Errorf("Record() = %v, want ErrTooLarge", err)
	}
	big := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		restart.RecreationOfAnnotation: "shop/migrate", restart.RecreationUIDAnnotation: "u"}},
		Data: map[string]string{restart.RecreationJobKey: strings.Repeat("x", restart.MaxRecreationBytes+1)}}
	if _, err := restart.FromRecord(big); !errors.Is(err, restart.ErrTooLarge) {
		t.Errorf("FromRecord(big) = %v, want ErrTooLarge", err)
	}
	good, err := recreation(t).Record("watcher")
	if err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func(*corev1.ConfigMap){
		"no job named": func(cm *corev1.ConfigMap) { delete(cm.Annotations, restart.RecreationOfAnnotation) },
		"no uid":       func(cm *corev1.ConfigMap) { delete(cm.Annotations, restart.RecreationUIDAnnotation) },
		"another job":  func(cm *corev1.ConfigMap) { cm.Annotations[restart.RecreationOfAnnotation] = "kube-system/other" },
		"not json":     func(cm *corev1.ConfigMap) { cm.Data[restart.RecreationJobKey] = "{" },
	} {
		cm := good.DeepCopy()
		change(cm)
		if _, err := restart.FromRecord(cm); err == nil {
			t.Errorf("%s: read", name)
		}
	}
}

// TestBackoff: one second, doubling, at most MaxBackoff; reported after
// about a minute.
func TestBackoff(t *testing.T) {
	want := []time.Duration{1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300}
	var total time.Duration
	for i, w := range want {
		if got := restart.Backoff(i); got != w*time.Second {
			t.Errorf("Backoff(%d) = %s, want %s", i, got, w*time.Second)
		}
		if i < restart.BlockedAfter {
			total += restart.Backoff(i)
		}
	}
	if restart.Backoff(1000) != restart.MaxBackoff {
		t.Error("Backoff(1000) is not MaxBackoff")
	}
	if total < 30*time.Second || total > 2*time.Minute {
		t.Errorf("reported after %s", total)
	}
}
