package object

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// Namespaces returns the namespaces an informer is started in, one each:
// watched, or every namespace (metav1.NamespaceAll) when none is given.
func Namespaces(watched []string) []string {
	if len(watched) == 0 {
		return []string{metav1.NamespaceAll}
	}
	return watched
}

// NotIn returns the field selector of the objects in none of the
// namespaces ignore ("" when it is empty), so that the API server leaves
// the ignored namespaces out of an informer's list and watch.
func NotIn(ignore []string) string {
	notIn := make([]fields.Selector, 0, len(ignore))
	for _, ns := range ignore {
		notIn = append(notIn, fields.OneTermNotEqualSelector("metadata.namespace", ns))
	}
	return fields.AndSelectors(notIn...).String()
}
