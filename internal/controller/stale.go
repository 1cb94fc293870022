package controller

import (
	"sync"

	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/object"
)

// staleSet follows the workloads whose pods run configuration older than
// the current one, as the last decision about each found: a restart due
// but not made (held by the guards, dry run, a rollback's content not
// rolled forward to). It keeps metrics.StaleWorkloads, per namespace.
type staleSet struct {
	mu   sync.Mutex
	keys map[object.Ref]bool
	byNS map[string]int
}

// set records whether the workload k is stale.
func (s *staleSet) set(k object.Ref, stale bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keys == nil {
		s.keys, s.byNS = map[object.Ref]bool{}, map[string]int{}
	}
	if s.keys[k] == stale {
		return
	}
	if stale {
		s.keys[k] = true
		s.byNS[k.Namespace]++
	} else {
		delete(s.keys, k)
		s.byNS[k.Namespace]--
	}
	if n := s.byNS[k.Namespace]; n > 0 {
		metrics.StaleWorkloads.WithLabelValues(k.Namespace).Set(float64(n))
	} else {
		delete(s.byNS, k.Namespace)
		metrics.StaleWorkloads.DeleteLabelValues(k.Namespace)
	}
}
