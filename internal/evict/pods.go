package evict

import (
	"context"
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Pods lists the pods of obj, a typed Deployment, StatefulSet or
// DaemonSet: those its selector matches in its namespace that it controls
// (through its ReplicaSets for a Deployment). r must read from the API
// server (the manager's API reader), never from a cache: a cached reader
// would start an informer on every pod of the cluster. The list asks for
// pods and, for a Deployment, ReplicaSets, in one namespace, by selector.
func Pods(ctx context.Context, r client.Reader, obj client.Object) ([]corev1.Pod, error) {
	var sel *metav1.LabelSelector
	switch o := obj.(type) {
	case *appsv1.Deployment:
		sel = o.Spec.Selector
	case *appsv1.StatefulSet:
		sel = o.Spec.Selector
	case *appsv1.DaemonSet:
		sel = o.Spec.Selector
	default:
		return nil, fmt.Errorf("evict %T: not a Deployment, StatefulSet or DaemonSet", obj)
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, fmt.Errorf("selector of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	in := []client.ListOption{client.InNamespace(obj.GetNamespace()), client.MatchingLabelsSelector{Selector: s}}
	owners := map[types.UID]bool{obj.GetUID(): true}
	if _, ok := obj.(*appsv1.Deployment); ok {
		owners = map[types.UID]bool{}
		var rss appsv1.ReplicaSetList
		if err := r.List(ctx, &rss, in...); err != nil {
			return nil, forbidden("list", "replicasets", obj.GetNamespace(), fmt.Errorf("list replicasets of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err))
		}
		for i := range rss.Items {
			if c := metav1.GetControllerOf(&rss.Items[i]); c != nil && c.UID == obj.GetUID() {
				owners[rss.Items[i].UID] = true
			}
		}
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, in...); err != nil {
		return nil, forbidden("list", "pods", obj.GetNamespace(), fmt.Errorf("list pods of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err))
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if Owned(&p, owners) {
			out = append(out, p)
		}
	}
	return out, nil
}

// ForbiddenError is the error of a request that watcher's rights do not
// allow (403 Forbidden): it names the right missing, for the Warning Event
// on the workload. Retrying cannot help until a person grants it.
type ForbiddenError struct {
	// Verb, Resource and Namespace name the right as RBAC does: "create",
	// "pods/eviction", "tenant-a".
	Verb, Resource, Namespace string
	Err                       error
}

// Error implements error.
func (e *ForbiddenError) Error() string { return e.Err.Error() }

// Unwrap returns the API server's error.
func (e *ForbiddenError) Unwrap() error { return e.Err }

// Right names the right missing: "create pods/eviction in namespace x".
func (e *ForbiddenError) Right() string {
	return e.Verb + " " + e.Resource + " in namespace " + e.Namespace
}

// forbidden returns err as a ForbiddenError for the right verb on
// resource in namespace if the API server refused it as forbidden, else
// err.
func forbidden(verb, resource, namespace string, err error) error {
	if !apierrors.IsForbidden(err) {
		return err
	}
	return &ForbiddenError{Verb: verb, Resource: resource, Namespace: namespace, Err: err}
}

// Evict asks the API server to evict pod (policy/v1 Eviction): it refuses
// while the pod's PodDisruptionBudget allows no disruption (see Blocked).
// A pod already gone is no error.
func Evict(ctx context.Context, c client.Client, pod *corev1.Pod) error {
	e := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	err := c.SubResource("eviction").Create(ctx, pod, e)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return forbidden("create", "pods/eviction", pod.Namespace, fmt.Errorf("evict pod %s/%s: %w", pod.Namespace, pod.Name, err))
	}
	return nil
}

// Blocked reports whether err is the API server's refusal of an eviction
// because of a PodDisruptionBudget (429 Too Many Requests, or 500 for a
// pod with more than one budget), and returns what the API server says of
// the budget: its name and how many healthy pods it needs.
func Blocked(err error) (string, bool) {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return "", false
	}
	s := st.Status()
	if s.Details != nil {
		for _, c := range s.Details.Causes {
			if c.Type == policyv1.DisruptionBudgetCause {
				return c.Message, true
			}
		}
	}
	switch {
	case apierrors.IsTooManyRequests(err):
		return s.Message, true
	case apierrors.IsInternalError(err) && strings.Contains(s.Message, "PodDisruptionBudget"):
		return s.Message, true
	}
	return "", false
}
