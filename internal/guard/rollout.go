package guard

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RollingAnnotation, on a workload kept in watcher's cache (never on the
// API server: its key has two slashes), says that the rollout of a
// workload watcher restarted (it has StateAnnotation) is not done. Whether
// the rollout is watcher's is decided from StateAnnotation (Rollouts.Seen),
// never from marks on the pod template, which anyone can copy and which a
// change of restart strategy leaves stale. It is absent once the rollout is
// done, so the cache holds nothing more for settled workloads.
const RollingAnnotation = "watcher.dev/cached/rolling"

// The marks a restart leaves on a pod template (see package restart): the
// annotation of the annotation strategy, the env var of the env strategy.
const (
	markAnnotation = "watcher.dev/restarted-for"
	markEnv        = "WATCHER_CONFIG_HASH"
)

// Rolling reports whether the rollout of obj, a workload as the API server
// returns it, is not done, as kubectl rollout status decides:
//
//	kind         done when
//	Deployment   status.observedGeneration >= generation, and
//	             updatedReplicas = spec.replicas, replicas = updatedReplicas,
//	             availableReplicas = updatedReplicas (a rollout past its
//	             progressDeadlineSeconds is not done either)
//	StatefulSet  observedGeneration caught up, readyReplicas = spec.replicas,
//	             and updateRevision = currentRevision (with a partition:
//	             updatedReplicas >= replicas - partition); OnDelete: done
//	DaemonSet    observedGeneration caught up, updatedNumberScheduled and
//	             numberAvailable = desiredNumberScheduled; OnDelete: done
//	CronJob      at once: it has no pods of its own
//	Rollout      (Argo) status.observedGeneration = generation and
//	             status.phase Healthy (or, without a phase, a condition
//	             Healthy True)
//	other        done
func Rolling(obj client.Object) bool {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return deploymentRolling(o)
	case *appsv1.StatefulSet:
		return statefulSetRolling(o)
	case *appsv1.DaemonSet:
		return daemonSetRolling(o)
	case *unstructured.Unstructured:
		if o.GetKind() == "Rollout" {
			return argoRolling(o)
		}
	}
	return false
}

func deploymentRolling(d *appsv1.Deployment) bool {
	s := d.Status
	if d.Generation > s.ObservedGeneration {
		return true
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return s.UpdatedReplicas < want || s.Replicas > s.UpdatedReplicas || s.AvailableReplicas < s.UpdatedReplicas
}

func statefulSetRolling(s *appsv1.StatefulSet) bool {
	if s.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return false
	}
	st := s.Status
	if st.ObservedGeneration == 0 || s.Generation > st.ObservedGeneration {
		return true
	}
	want := int32(1)
	if s.Spec.Replicas != nil {
		want = *s.Spec.Replicas
	}
	if st.ReadyReplicas < want {
		return true
	}
	if ru := s.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil && *ru.Partition > 0 {
		return st.UpdatedReplicas < want-*ru.Partition
	}
	return st.UpdateRevision != st.CurrentRevision
}

func daemonSetRolling(d *appsv1.DaemonSet) bool {
	if d.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType {
		return false
	}
	s := d.Status
	return d.Generation > s.ObservedGeneration || s.UpdatedNumberScheduled < s.DesiredNumberScheduled ||
		s.NumberAvailable < s.DesiredNumberScheduled
}

func argoRolling(u *unstructured.Unstructured) bool {
	// Argo has written observedGeneration as a string and as a number.
	observed, _, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "observedGeneration")
	gen := strconv.FormatInt(u.GetGeneration(), 10)
	switch v := observed.(type) {
	case string:
		if v != gen {
			return true
		}
	case int64:
		if v < u.GetGeneration() {
			return true
		}
	case float64:
		if int64(v) < u.GetGeneration() {
			return true
		}
	default:
		return true
	}
	if phase, ok, _ := unstructured.NestedString(u.Object, "status", "phase"); ok {
		return phase != "Healthy"
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Healthy" {
			return m["status"] != "True"
		}
	}
	return true
}

// Mark returns a restart ID a restart of watcher left on a pod template:
// the annotation, else the env var of the first container that has it; ""
// if none. It tells that watcher restarted the workload once (tests, the
// benchmark), not which restart is current: a change of strategy leaves
// the other's mark.
func Mark(tmpl *corev1.PodTemplateSpec) string {
	if tmpl == nil {
		return ""
	}
	if m := tmpl.Annotations[markAnnotation]; m != "" {
		return m
	}
	for _, cs := range [][]corev1.Container{tmpl.Spec.InitContainers, tmpl.Spec.Containers} {
		for _, c := range cs {
			for _, e := range c.Env {
				if e.Name == markEnv {
					return e.Value
				}
			}
		}
	}
	return ""
}
