package store

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/watcher-dev/watcher/internal/packed"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/workload"
)

// annotated returns transform followed by Options.Annotate.
func annotated(transform toolscache.TransformFunc, annotate func(*metav1.PartialObjectMetadata)) toolscache.TransformFunc {
	if annotate == nil {
		return transform
	}
	return func(obj any) (any, error) {
		out, err := transform(obj)
		if m, ok := out.(*metav1.PartialObjectMetadata); ok && err == nil {
			annotate(m)
		}
		return out, err
	}
}

// Workloads returns the workloads of kind in namespace that the store
// holds (read only), through the informer's namespace index: for the label
// selectors of policies, work proportional to the namespace. With
// metav1.NamespaceAll, every one the store holds (a pass over the cache).
// They are the store's own, packed: read them, or ask for Meta.
func (s *Store) Workloads(kind, namespace string) ([]*packed.Object, error) {
	var objs []any
	if namespace == metav1.NamespaceAll {
		for _, inf := range s.Informers(kind) {
			objs = append(objs, inf.GetStore().List()...)
		}
	} else {
		s.mu.RLock()
		inf := s.informer(kind, namespace)
		s.mu.RUnlock()
		if inf == nil {
			return nil, nil
		}
		var err error
		if objs, err = inf.GetIndexer().ByIndex(toolscache.NamespaceIndex, namespace); err != nil {
			return nil, fmt.Errorf("list %s in %s: %w", kind, namespace, err)
		}
	}
	return asPacked(objs)
}

// Reindex stores again the workload of kind namespace/name, if the store
// holds it, with what Options.Annotate records now: the index entries of
// the stored object are removed and those of the new one added. It is for
// a source of references that changes on its own (a policy), and tells
// whether the workload is there.
//
// Limit: client-go has no compare-and-swap; a newer version of the
// workload that its informer stores between the read and the write here
// is replaced by this one, which is older, until the workload's next
// event (a window of microseconds, at a policy change).
func (s *Store) Reindex(kind, namespace, name string) (bool, error) {
	s.mu.RLock()
	inf := s.informer(kind, namespace)
	s.mu.RUnlock()
	if inf == nil || s.opts.Annotate == nil {
		return false, nil
	}
	obj, found, err := inf.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil || !found {
		return false, err
	}
	m, err := asMeta(obj)
	if err != nil {
		return false, err
	}
	s.opts.Annotate(m)
	if err := inf.GetIndexer().Update(packed.Pack(m)); err != nil {
		return true, fmt.Errorf("index %s %s/%s again: %w", kind, namespace, name, err)
	}
	return true, nil
}

// UsersOf returns the keys of the workloads that use the ConfigMap or
// Secret namespace/name (see Users), with no copy of them.
func (s *Store) UsersOf(kind refs.Kind, namespace, name string) ([]workload.Key, error) {
	var out []workload.Key
	err := s.eachUser(kind, namespace, name, func(k string, o *packed.Object) {
		out = append(out, workload.Key{Kind: k, Namespace: o.GetNamespace(), Name: o.GetName()})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
