// Package v1alpha1 holds the watcher.dev/v1alpha1 API: the ReloadPolicy
// resource, which lists the ConfigMaps and Secrets whose changes restart
// workloads of the same namespace.
//
// The CRD in deploy/crds/ is generated from these types by controller-gen
// (`make generate`); validation lives in the markers here, so the API server
// rejects an invalid policy before any controller sees it.
//
// +kubebuilder:object:generate=true
// +groupName=watcher.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the objects of this package.
	GroupVersion = schema.GroupVersion{Group: "watcher.dev", Version: "v1alpha1"}

	// SchemeBuilder registers this package's types with a scheme. It is
	// apimachinery's, not controller-runtime's: an API package should import
	// little.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &ReloadPolicy{}, &ReloadPolicyList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
