// Package workload knows the kinds of workload watcher restarts and where each
// keeps its pod template.
//
// Adding a kind is one entry in Kinds and one case in PodTemplate.
package workload

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Kind describes one workload kind.
type Kind struct {
	// Name is the Kubernetes kind, e.g. "Deployment".
	Name string
	// New returns an empty object of the kind.
	New func() client.Object
	// NewList returns an empty list of the kind.
	NewList func() client.ObjectList
}

// Kinds are the workload kinds watcher restarts.
var Kinds = []Kind{
	{"Deployment", func() client.Object { return &appsv1.Deployment{} }, func() client.ObjectList { return &appsv1.DeploymentList{} }},
	{"StatefulSet", func() client.Object { return &appsv1.StatefulSet{} }, func() client.ObjectList { return &appsv1.StatefulSetList{} }},
	{"DaemonSet", func() client.Object { return &appsv1.DaemonSet{} }, func() client.ObjectList { return &appsv1.DaemonSetList{} }},
}

// ByName returns the Kind called name.
func ByName(name string) (Kind, bool) {
	for _, k := range Kinds {
		if k.Name == name {
			return k, true
		}
	}
	return Kind{}, false
}

// PodTemplate returns the pod template of a workload, or an error for an
// object that is not a known workload.
func PodTemplate(obj client.Object) (*corev1.PodTemplateSpec, error) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return &o.Spec.Template, nil
	case *appsv1.StatefulSet:
		return &o.Spec.Template, nil
	case *appsv1.DaemonSet:
		return &o.Spec.Template, nil
	default:
		return nil, fmt.Errorf("%T is not a workload watcher restarts", obj)
	}
}

// Key identifies one workload: the request type of watcher's work queue.
type Key struct {
	Kind      string
	Namespace string
	Name      string
}

// String returns "Kind namespace/name".
func (k Key) String() string { return k.Kind + " " + k.Namespace + "/" + k.Name }

// KeyOf returns the Key of a workload object.
func KeyOf(kind string, obj client.Object) Key {
	return Key{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
}
