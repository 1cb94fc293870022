package store

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/optin"
)

// renamed returns transform preceded by the renaming of the installation's
// annotation keys (optin.Keys) in the object as the API server sent it. An
// object already transformed passes unchanged: its keys are renamed
// already, and renaming them again would drop them (the transform must be
// idempotent).
func renamed(keys optin.Keys, transform toolscache.TransformFunc) toolscache.TransformFunc {
	if len(keys) == 0 {
		return transform
	}
	return func(obj any) (any, error) {
		if _, done := obj.(*metav1.PartialObjectMetadata); !done {
			if o, ok := obj.(client.Object); ok {
				keys.Rename(o)
			}
		}
		return transform(obj)
	}
}
