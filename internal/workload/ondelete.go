package workload

import (
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/packed"
)

// OnDeleteAnnotation holds, on a workload in watcher's store, why changing
// its pod template rolls none of its pods (see OnDelete). Like
// RefsAnnotation, the key is not a valid annotation key.
const OnDeleteAnnotation = "watcher.dev/cached/on-delete"

// OnDelete tells why a change of obj's pod template replaces no pod until
// the pods are deleted, or "" when the template change rolls them:
//
//	workload                                          reason
//	StatefulSet or DaemonSet, updateStrategy OnDelete "OnDelete"
//	StatefulSet, RollingUpdate partition >= replicas  "partition"
//	anything else                                     ""
//
// A stored workload carries the reason in OnDeleteAnnotation.
func OnDelete(obj client.Object) string {
	if r, ok := packed.Annotation(obj, OnDeleteAnnotation); ok {
		return r
	}
	k, ok := Of(obj)
	if !ok || k.onDelete == nil {
		return ""
	}
	return k.onDelete(obj)
}

func statefulSetOnDelete(obj client.Object) string {
	o, ok := obj.(*appsv1.StatefulSet)
	if !ok {
		return ""
	}
	s := o.Spec.UpdateStrategy
	if s.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return "OnDelete"
	}
	replicas := int32(1)
	if o.Spec.Replicas != nil {
		replicas = *o.Spec.Replicas
	}
	if s.RollingUpdate != nil && s.RollingUpdate.Partition != nil && *s.RollingUpdate.Partition >= replicas {
		return "partition"
	}
	return ""
}

func daemonSetOnDelete(obj client.Object) string {
	if o, ok := obj.(*appsv1.DaemonSet); ok && o.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType {
		return "OnDelete"
	}
	return ""
}
