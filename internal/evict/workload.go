package evict

import (
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Allowance returns how many pods obj, a typed workload, wants, how many
// of them it may have unavailable at once, and the order of its
// evictions, from its own rolling-update settings:
//
//	workload     want                     allowance                    order
//	Deployment   spec.replicas (1)        maxUnavailable of replicas   Oldest
//	                                      (rounded down; 0, as with a
//	                                      surge-only strategy: 1)
//	StatefulSet  spec.replicas (1)        rollingUpdate.maxUnavailable HighestOrdinal
//	                                      (1; OnDelete: 1)
//	DaemonSet    desiredNumberScheduled   rollingUpdate.maxUnavailable ByNode
//	                                      (1; OnDelete: 1)
//	other        0                        1                            Oldest
//
// A percentage is of want, rounded down, and at least 1.
func Allowance(obj client.Object) (want, allowance int, order Order) {
	var mu *intstr.IntOrString
	switch o := obj.(type) {
	case *appsv1.Deployment:
		want = replicas(o.Spec.Replicas)
		if ru := o.Spec.Strategy.RollingUpdate; ru != nil {
			mu = ru.MaxUnavailable
		}
		if o.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
			mu = nil
		}
	case *appsv1.StatefulSet:
		want, order = replicas(o.Spec.Replicas), HighestOrdinal
		if ru := o.Spec.UpdateStrategy.RollingUpdate; ru != nil && o.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
			mu = ru.MaxUnavailable
		}
	case *appsv1.DaemonSet:
		want, order = int(o.Status.DesiredNumberScheduled), ByNode
		if ru := o.Spec.UpdateStrategy.RollingUpdate; ru != nil && o.Spec.UpdateStrategy.Type != appsv1.OnDeleteDaemonSetStrategyType {
			mu = ru.MaxUnavailable
		}
	}
	allowance = 1
	if mu != nil {
		if n, err := intstr.GetScaledValueFromIntOrPercent(mu, want, false); err == nil && n > 1 {
			allowance = n
		}
	}
	return want, allowance, order
}

func replicas(r *int32) int {
	if r == nil {
		return 1
	}
	return int(*r)
}

// Owned reports whether pod is controlled by one of owners: for a
// Deployment, the UIDs of the ReplicaSets it controls; for a StatefulSet
// or a DaemonSet, its own UID (their ControllerRevisions own no pods). A
// pod that only matches the selector, of another workload, is not owned.
func Owned(pod *corev1.Pod, owners map[types.UID]bool) bool {
	for _, r := range pod.OwnerReferences {
		if r.Controller != nil && *r.Controller {
			return owners[r.UID]
		}
	}
	return false
}

// FromPod returns what Next knows of pod.
func FromPod(pod *corev1.Pod) Pod {
	p := Pod{
		Name:        pod.Name,
		Created:     pod.CreationTimestamp.Time,
		Terminating: pod.DeletionTimestamp != nil,
		Ordinal:     ordinal(pod.Name),
		Node:        pod.Spec.NodeName,
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			p.Ready = c.Status == corev1.ConditionTrue
		}
	}
	return p
}

// ordinal is the number after the last "-" of a StatefulSet pod's name;
// -1 if there is none.
func ordinal(name string) int {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return -1
	}
	n, err := strconv.Atoi(name[i+1:])
	if err != nil || n < 0 {
		return -1
	}
	return n
}
