package evict_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/watcher-dev/watcher/internal/evict"
)

// TestAllowance: one row per line of Allowance's table.
func TestAllowance(t *testing.T) {
	mu := func(v intstr.IntOrString) *intstr.IntOrString { return &v }
	dep := func(replicas int32, s appsv1.DeploymentStrategy) *appsv1.Deployment {
		return &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: &replicas, Strategy: s}}
	}
	rolling := func(v intstr.IntOrString) appsv1.DeploymentStrategy {
		return appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: mu(v)}}
	}
	sts := func(replicas int32, s appsv1.StatefulSetUpdateStrategy) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: &replicas, UpdateStrategy: s}}
	}
	ds := func(desired int32, s appsv1.DaemonSetUpdateStrategy) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{UpdateStrategy: s}, Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: desired}}
	}
	tests := []struct {
		name            string
		obj             client.Object
		want, allowance int
		order           evict.Order
	}{
		{"Deployment, no strategy: 1", &appsv1.Deployment{}, 1, 1, evict.Oldest},
		{"Deployment maxUnavailable 2", dep(5, rolling(intstr.FromInt32(2))), 5, 2, evict.Oldest},
		{"Deployment maxUnavailable 25% of 10: 2", dep(10, rolling(intstr.FromString("25%"))), 10, 2, evict.Oldest},
		{"Deployment maxUnavailable 25% of 3: 1", dep(3, rolling(intstr.FromString("25%"))), 3, 1, evict.Oldest},
		{"Deployment maxUnavailable 0 (surge only): 1", dep(3, rolling(intstr.FromInt32(0))), 3, 1, evict.Oldest},
		{"Deployment Recreate: 1", dep(3, appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}), 3, 1, evict.Oldest},
		{"StatefulSet: 1, highest ordinal first", sts(3, appsv1.StatefulSetUpdateStrategy{}), 3, 1, evict.HighestOrdinal},
		{"StatefulSet maxUnavailable 2", sts(4, appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: mu(intstr.FromInt32(2))}}), 4, 2, evict.HighestOrdinal},
		{"StatefulSet OnDelete: 1", sts(4, appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: mu(intstr.FromInt32(2))}}), 4, 1, evict.HighestOrdinal},
		{"DaemonSet: desired nodes, 1, node by node", ds(5, appsv1.DaemonSetUpdateStrategy{}), 5, 1, evict.ByNode},
		{"DaemonSet maxUnavailable 40% of 5: 2", ds(5, appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: mu(intstr.FromString("40%"))}}), 5, 2, evict.ByNode},
		{"DaemonSet OnDelete: 1", ds(5, appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}), 5, 1, evict.ByNode},
		{"other: 1", &corev1.Pod{}, 0, 1, evict.Oldest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, allowance, order := evict.Allowance(tt.obj)
			if want != tt.want || allowance != tt.allowance || order != tt.order {
				t.Errorf("got %d, %d, %v; want %d, %d, %v", want, allowance, order, tt.want, tt.allowance, tt.order)
			}
		})
	}
}

// TestFromPod: readiness, termination, ordinal and node of a pod.
func TestFromPod(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	now := metav1.Now()
	tests := []struct {
		pod  corev1.Pod
		want evict.Pod
	}{
		{corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-12", CreationTimestamp: created}, Spec: corev1.PodSpec{NodeName: "n1"},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}},
			evict.Pod{Name: "db-12", Created: created.Time, Ready: true, Ordinal: 12, Node: "n1"}},
		{corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-7d4f-x2k9p", CreationTimestamp: created, DeletionTimestamp: &now},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}}},
			evict.Pod{Name: "web-7d4f-x2k9p", Created: created.Time, Terminating: true, Ordinal: -1}},
		{corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}, evict.Pod{Name: "plain", Ordinal: -1}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, evict.FromPod(&tt.pod)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.pod.Name, diff)
		}
	}
}

// TestBlocked: the API server's refusals because of a budget, with the
// budget's name when it gives one, and other errors.
func TestBlocked(t *testing.T) {
	withCause := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
	withCause.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: policyv1.DisruptionBudgetCause, Message: "The disruption budget web-pdb needs 1 healthy pods and has 1 currently"}}
	tests := []struct {
		name string
		err  error
		want string
		ok   bool
	}{
		{"budget named", withCause, "The disruption budget web-pdb needs 1 healthy pods and has 1 currently", true},
		{"429 without cause", apierrors.NewTooManyRequests("Cannot evict pod", 10), "Cannot evict pod", true},
		{"two budgets", apierrors.NewInternalError(errors.New("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.")), "", true},
		{"not found", apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "x"), "", false},
		{"other", errors.New("boom"), "", false},
	}
	for _, tt := range tests {
		got, ok := evict.Blocked(tt.err)
		if ok != tt.ok || (tt.want != "" && got != tt.want) {
			t.Errorf("%s: %q, %v", tt.name, got, ok)
		}
	}
}

// TestPods: only the pods the workload controls (through its ReplicaSets
// for a Deployment) are listed, not another workload's pods that its
// selector matches, nor pods of another namespace.
func TestPods(t *testing.T) {
	labels := map[string]string{"app": "web"}
	sel := &metav1.LabelSelector{MatchLabels: labels}
	owner := func(kind, name string, uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
	}
	podOf := func(ns, name string, refs []metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, OwnerReferences: refs}}
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "dep"}, Spec: appsv1.DeploymentSpec{Selector: sel}}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "sts"}, Spec: appsv1.StatefulSetSpec{Selector: sel}}
	objs := []client.Object{
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", UID: "rs1", Labels: labels, OwnerReferences: owner("Deployment", "web", "dep")}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-2", UID: "rs2", Labels: labels, OwnerReferences: owner("Deployment", "web", "dep")}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other-1", UID: "rs3", Labels: labels, OwnerReferences: owner("Deployment", "other", "other")}},
		podOf("ns", "web-1-a", owner("ReplicaSet", "web-1", "rs1")),
		podOf("ns", "web-2-a", owner("ReplicaSet", "web-2", "rs2")),
		podOf("ns", "other-1-a", owner("ReplicaSet", "other-1", "rs3")),
		podOf("ns", "bare", nil),
		podOf("ns", "db-0", owner("StatefulSet", "db", "sts")),
		podOf("elsewhere", "web-1-b", owner("ReplicaSet", "web-1", "rs1")),
	}
	c := fake.NewClientBuilder().WithObjects(objs...).Build()
	names := func(obj client.Object) []string {
		pods, err := evict.Pods(context.Background(), c, obj)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range pods {
			out = append(out, p.Name)
		}
		return out
	}
	if diff := cmp.Diff([]string{"web-1-a", "web-2-a"}, names(dep)); diff != "" {
		t.Errorf("Deployment (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"db-0"}, names(sts)); diff != "" {
		t.Errorf("StatefulSet (-want +got):\n%s", diff)
	}
	if _, err := evict.Pods(context.Background(), c, &corev1.Pod{}); err == nil {
		t.Error("a pod as workload: no error")
	}
}
