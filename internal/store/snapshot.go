package store

import (
	"github.com/watcher-dev/watcher/internal/packed"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/resolve"
)

// isSnapshot tells whether the store holds the ConfigMap or Secret
// namespace/name and it is a snapshot (resolve.IsSnapshot); the caller
// holds mu.
func (s *Store) isSnapshot(kind refs.Kind, namespace, name string) bool {
	inf := s.informer(string(kind), namespace)
	if inf == nil {
		return false
	}
	obj, found, err := inf.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil || !found {
		return false
	}
	o, ok := obj.(*packed.Object)
	return ok && resolve.IsSnapshot(o)
}
