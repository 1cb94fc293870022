// Package workload knows the kinds of workload watcher restarts and where each
// keeps its pod template.
//
// Adding a kind is one entry in Kinds and one case in PodTemplate.
package workload

import (
	"fmt"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/refs"
)

// Kind describes one workload kind.
type Kind struct {
	// Name is the Kubernetes kind, e.g. "Deployment".
	Name       string
	APIVersion string
	// New returns an empty object of the kind.
	New func() client.Object
	// NewList returns an empty list of the kind.
	NewList func() client.ObjectList
	// NewInformer returns a client-go informer of the kind.
	NewInformer func(kubernetes.Interface, string, internalinterfaces.InformerOptions) toolscache.SharedIndexInformer
}

// Kinds are the workload kinds watcher restarts.
var Kinds = []Kind{
	{"Deployment", "apps/v1", func() client.Object { return &appsv1.Deployment{} }, func() client.ObjectList { return &appsv1.DeploymentList{} }, appsinformers.NewDeploymentInformerWithOptions},
	{"StatefulSet", "apps/v1", func() client.Object { return &appsv1.StatefulSet{} }, func() client.ObjectList { return &appsv1.StatefulSetList{} }, appsinformers.NewStatefulSetInformerWithOptions},
	{"DaemonSet", "apps/v1", func() client.Object { return &appsv1.DaemonSet{} }, func() client.ObjectList { return &appsv1.DaemonSetList{} }, appsinformers.NewDaemonSetInformerWithOptions},
}

// KindOf returns the Kind of a typed workload object.
func KindOf(obj client.Object) (Kind, bool) {
	for _, k := range Kinds {
		if reflect.TypeOf(k.New()) == reflect.TypeOf(obj) {
			return k, true
		}
	}
	return Kind{}, false
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

// Key identifies one workload.
type Key struct {
	Kind      string
	Namespace string
	Name      string
}

// String returns "Kind namespace/name".
func (k Key) String() string { return k.Kind + " " + k.Namespace + "/" + k.Name }

// RefsAnnotation holds, on a workload in watcher's store, its references
// (refs.Encode) in place of its pod template, which the store does not keep.
// Like hash.SumAnnotation, the key is not a valid annotation key, so no
// object from the API server can carry it.
const RefsAnnotation = "watcher.dev/cached/refs"

// Refs returns the ConfigMaps and Secrets a workload uses: from
// RefsAnnotation on a stored workload, from its pod template on one read
// from the API server.
func Refs(obj client.Object) ([]refs.Ref, error) {
	if s, ok := obj.GetAnnotations()[RefsAnnotation]; ok {
		return refs.Decode(s)
	}
	tmpl, err := PodTemplate(obj)
	if err != nil {
		return nil, err
	}
	return refs.FromPodSpec(&tmpl.Spec), nil
}

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
	if r, ok := obj.GetAnnotations()[OnDeleteAnnotation]; ok {
		return r
	}
	switch o := obj.(type) {
	case *appsv1.StatefulSet:
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
	case *appsv1.DaemonSet:
		if o.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType {
			return "OnDelete"
		}
	}
	return ""
}
