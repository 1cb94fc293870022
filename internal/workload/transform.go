package workload

import (
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// lastApplied is written by `kubectl apply` and holds a full copy of the
// object.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// Transform is a cache transform for workloads: it drops what watcher never
// reads (managed fields, the last-applied copy, status) so that thousands of
// cached workloads cost little memory. It is idempotent.
func Transform(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
		if a := m.GetAnnotations(); a != nil {
			delete(a, lastApplied)
		}
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		o.Status = appsv1.DeploymentStatus{}
	case *appsv1.StatefulSet:
		o.Status = appsv1.StatefulSetStatus{}
	case *appsv1.DaemonSet:
		o.Status = appsv1.DaemonSetStatus{}
	}
	return obj, nil
}
