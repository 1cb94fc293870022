package guard_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/restart"
)

func deployment(gen, observed int64, replicas int32, s appsv1.DeploymentStatus) *appsv1.Deployment {
	s.ObservedGeneration = observed
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: gen}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas)}, Status: s}
}

func argo(gen int64, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "status": status}}
	u.SetGeneration(gen)
	return u
}

func TestRolling(t *testing.T) {
	sts := func(gen, observed int64, ready int32, cur, upd string, partition *int32) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: gen}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2)},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: observed, ReadyReplicas: ready, CurrentRevision: cur, UpdateRevision: upd, UpdatedReplicas: ready}}
		if partition != nil {
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: partition}
		}
		return s
	}
	ds := func(gen, observed int64, desired, updated, available int32) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Generation: gen}, Status: appsv1.DaemonSetStatus{ObservedGeneration: observed,
			DesiredNumberScheduled: desired, UpdatedNumberScheduled: updated, NumberAvailable: available}}
	}
	tests := []struct {
		name string
		obj  client.Object
		want bool
	}{
		{"deployment: generation not observed", deployment(3, 2, 1, appsv1.DeploymentStatus{Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1}), true},
		{"deployment: new pods not all updated", deployment(3, 3, 2, appsv1.DeploymentStatus{Replicas: 2, UpdatedReplicas: 1, AvailableReplicas: 2}), true},
		{"deployment: old pods left", deployment(3, 3, 1, appsv1.DeploymentStatus{Replicas: 2, UpdatedReplicas: 1, AvailableReplicas: 1}), true},
		{"deployment: new pods not available", deployment(3, 3, 1, appsv1.DeploymentStatus{Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 0}), true},
		{"deployment: done", deployment(3, 3, 1, appsv1.DeploymentStatus{Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1}), false},
		{"deployment: zero replicas, observed", deployment(3, 3, 0, appsv1.DeploymentStatus{}), false},
		{"statefulset: revisions differ", sts(2, 2, 2, "a", "b", nil), true},
		{"statefulset: not ready", sts(2, 2, 1, "b", "b", nil), true},
		{"statefulset: done", sts(2, 2, 2, "b", "b", nil), false},
		{"statefulset: partition reached", sts(2, 2, 2, "a", "b", ptr.To[int32](1)), false},
		{"statefulset: OnDelete", &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: 9}, Spec: appsv1.StatefulSetSpec{UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}}}, false},
		{"daemonset: not all updated", ds(2, 2, 3, 2, 3), true},
		{"daemonset: not all available", ds(2, 2, 3, 3, 2), true},
		{"daemonset: not observed", ds(2, 1, 3, 3, 3), true},
		{"daemonset: done", ds(2, 2, 3, 3, 3), false},
		{"cronjob: at once", &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Generation: 5}}, false},
		{"rollout: healthy", argo(4, map[string]any{"observedGeneration": "4", "phase": "Healthy"}), false},
		{"rollout: healthy, numeric generation", argo(4, map[string]any{"observedGeneration": int64(4), "phase": "Healthy"}), false},
		{"rollout: progressing", argo(4, map[string]any{"observedGeneration": "4", "phase": "Progressing"}), true},
		{"rollout: not observed", argo(5, map[string]any{"observedGeneration": "4", "phase": "Healthy"}), true},
		{"rollout: no phase, Healthy condition", argo(4, map[string]any{"observedGeneration": "4", "conditions": []any{map[string]any{"type": "Healthy", "status": "True"}}}), false},
		{"rollout: no status", argo(1, nil), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := guard.Rolling(tt.obj); got != tt.want {
				t.Errorf("Rolling() = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestMark reads the marks of both restart strategies, by their own
// constants.
func TestMark(t *testing.T) {
	for _, tt := range []struct {
		name string
		tmpl *corev1.PodTemplateSpec
		want string
	}{
		{"none", &corev1.PodTemplateSpec{}, ""},
		{"nil", nil, ""},
		{"annotation", &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{plan.RestartAnnotation: "abc"}}}, "abc"},
		{"env", &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}, {Name: "b", Env: []corev1.EnvVar{{Name: restart.EnvName, Value: "def"}}}}}}, "def"},
	} {
		if got := guard.Mark(tt.tmpl); got != tt.want {
			t.Errorf("%s: Mark() = %q, want %q", tt.name, got, tt.want)
		}
	}
}
