package workload_test

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/packed"
	"github.com/watcher-dev/watcher/internal/workload"
)

// stored is obj as the store keeps it: its Template in
// workload.TemplateAnnotation.
func stored(obj client.Object) client.Object {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: obj.GetUID(), Generation: obj.GetGeneration(),
		ResourceVersion: obj.GetResourceVersion(), Annotations: map[string]string{}}}
	if t := workload.Template(obj); t != "" {
		m.Annotations[workload.TemplateAnnotation] = t
	}
	return packed.Pack(m)
}

// dep is a Deployment at generation gen and resourceVersion rv, its
// controller at observed, running image.
func dep(gen, observed int64, rv, image string, mod ...func(*appsv1.Deployment)) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", UID: "u", Generation: gen, ResourceVersion: rv},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: image}}}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: observed}}
	for _, m := range mod {
		m(d)
	}
	return d
}

func TestTemplate(t *testing.T) {
	a, b := workload.Template(dep(2, 2, "1", "a")), workload.Template(dep(2, 2, "1", "b"))
	if a == "" || a == b {
		t.Errorf("templates a %q, b %q: want two digests", a, b)
	}
	if got := workload.Template(dep(3, 2, "1", "a")); got != a+"+" {
		t.Errorf("unobserved: %q, want %q", got, a+"+")
	}
	if got := workload.Template(dep(2, 2, "1", "a", func(d *appsv1.Deployment) { d.Spec.Paused = true })); got != "" {
		t.Errorf("paused: %q, want none", got)
	}
	sts := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
		RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](1)}}}}
	if got := workload.Template(sts); got != "" {
		t.Errorf("a partition: %q, want none", got)
	}
	if got := workload.Template(&appsv1.StatefulSet{}); got == "" || strings.HasSuffix(got, "+") {
		t.Errorf("a StatefulSet rolling: %q", got)
	}
}

func TestReleases(t *testing.T) {
	tests := []struct {
		name     string
		old, cur *appsv1.Deployment
		want     string
	}{
		{"the template changed by one write, seen as made", dep(1, 1, "10", "a"), dep(2, 1, "20", "b"), "20"},
		{"seen after its controller observed it (a re-list): unknown", dep(1, 1, "10", "a"), dep(2, 2, "30", "b"), ""},
		{"two spec changes at once: unknown", dep(1, 1, "10", "a"), dep(3, 1, "30", "b"), ""},
		{"a scale is no template change", dep(1, 1, "10", "a"), dep(2, 1, "20", "a"), ""},
		{"paused: its pods do not roll", dep(1, 1, "10", "a"), dep(2, 1, "20", "b", func(d *appsv1.Deployment) { d.Spec.Paused = true }), ""},
		{"written while the rollout before it was in progress: unknown", dep(1, 1, "10", "a", func(d *appsv1.Deployment) { d.Status.Replicas, d.Status.UpdatedReplicas = 2, 1 }),
			dep(2, 1, "20", "b", func(d *appsv1.Deployment) { d.Status.Replicas, d.Status.UpdatedReplicas = 2, 1 }), ""},
		{"unpaused with a new template: unknown", dep(1, 1, "10", "a", func(d *appsv1.Deployment) { d.Spec.Paused = true }), dep(2, 1, "20", "b"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r workload.Releases
			r.Observe(stored(tt.old), stored(tt.cur))
			if got := r.Since(stored(tt.cur)); got != tt.want {
				t.Errorf("Since %q, want %q", got, tt.want)
			}
		})
	}

	var r workload.Releases
	r.Observe(stored(dep(1, 1, "10", "a")), stored(dep(2, 1, "20", "b")))
	if got := r.Since(stored(dep(2, 2, "25", "b"))); got != "20" {
		t.Errorf("observed since: %q, want 20", got)
	}
	if got := r.Since(stored(dep(3, 2, "30", "b"))); got != "" {
		t.Errorf("a later spec change (a scale): %q, want none", got)
	}
	r.Observe(stored(dep(2, 2, "25", "b")), stored(dep(3, 3, "40", "c")))
	if got := r.Since(stored(dep(3, 3, "40", "c"))); got != "" {
		t.Errorf("a template change not seen as made forgets the last: %q", got)
	}
	r.Observe(stored(dep(3, 3, "40", "c")), stored(dep(4, 3, "50", "d")))
	r.Forget(stored(dep(4, 3, "50", "d")))
	if got := r.Since(stored(dep(4, 3, "50", "d"))); got != "" {
		t.Errorf("forgotten: %q", got)
	}
}

// TestAttackReleasesUndo: a template that returns to one the workload had
// before (kubectl rollout undo while the release's rollout is in
// progress, or a re-applied older manifest) is no new template: the
// deployment controller scales its ReplicaSet back up, keeping the pods
// it still has, which were started before the undo was written (and
// before any ConfigMap written since they started). Since must not say
// that the undo made the template, or rule Released skips the restart of
// a change written between the release and the undo, which those pods
// never read.
func TestAttackReleasesUndo(t *testing.T) {
	var r workload.Releases
	r.Observe(stored(dep(1, 1, "10", "a")), stored(dep(2, 1, "20", "b"))) // the release
	// a ConfigMap the pods of "a" read is written at 25, while the
	// rollout to "b" is in progress (one pod of each); then the undo:
	inProgress := func(d *appsv1.Deployment) { d.Status.Replicas, d.Status.UpdatedReplicas = 2, 1 }
	r.Observe(stored(dep(2, 2, "21", "b", inProgress)), stored(dep(3, 2, "30", "a", inProgress)))
	if got := r.Since(stored(dep(3, 2, "30", "a", inProgress))); got != "" {
		t.Errorf("Since %q after an undo to a template the workload had: want unknown (its pods may predate 25)", got)
	}
}
