package store

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1informers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/watcher-dev/watcher/internal/slim"
)

// KindNamespace is the kind of the informer of the selected namespaces
// (Informers(KindNamespace)), present only with Options.NamespaceSelector.
const KindNamespace = "Namespace"

// namespaceInformer watches the namespaces that selector matches, the
// selector applied by the API server: a namespace that comes to match is
// added, one that no longer matches is deleted, as if it were created and
// deleted. Each is kept as its trimmed metadata (slim.Meta).
func namespaceInformer(cs kubernetes.Interface, selector string) toolscache.SharedIndexInformer {
	return corev1informers.NewNamespaceInformerWithOptions(cs, internalinterfaces.InformerOptions{
		TweakListOptions: func(o *metav1.ListOptions) { o.LabelSelector = selector },
	})
}

// slimNamespace keeps the metadata of a Namespace (idempotent).
func slimNamespace(obj any) (any, error) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return obj, nil // already trimmed, or a tombstone
	}
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: KindNamespace},
		ObjectMeta: slim.Meta(ns.ObjectMeta, nil),
	}, nil
}

// Selected tells whether watcher handles the objects of namespace: always
// without Options.NamespaceSelector, else when the namespace's labels
// match it now. The informer's store is safe for concurrent use: no lock
// of the Store is needed beyond reading which informer it is.
func (s *Store) Selected(namespace string) bool {
	s.mu.RLock()
	inf := s.byKind[KindNamespace][metav1.NamespaceAll]
	s.mu.RUnlock()
	if inf == nil {
		return true
	}
	_, found, err := inf.GetStore().GetByKey(namespace)
	return err == nil && found
}
