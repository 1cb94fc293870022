package store

import (
	"context"
	"fmt"

	"k8s.io/client-go/dynamic/dynamicinformer"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/watcher-dev/watcher/internal/workload"
)

// Enable creates and runs the informers of k, an optional kind (a custom
// resource read as unstructured objects, trimmed by the same transform as
// every workload), one per watched namespace, until Disable or until ctx
// is done, and returns them so that the controller can watch them. It
// returns none if k is already enabled or the store has no dynamic client.
// Enable and Disable are called from one goroutine.
func (s *Store) Enable(ctx context.Context, k workload.Kind) ([]toolscache.SharedIndexInformer, error) {
	s.mu.RLock()
	_, on := s.optional[k.Name()]
	s.mu.RUnlock()
	if on || s.opts.Dynamic == nil {
		return nil, nil
	}
	infs := map[string]toolscache.SharedIndexInformer{}
	var out []toolscache.SharedIndexInformer
	for _, ns := range s.namespaces {
		inf := dynamicinformer.NewFilteredDynamicInformer(s.opts.Dynamic, k.GVR(), ns, 0,
			indexers(s.opts.Log, refsOr(s.opts.Refs), s.opts.Wildcards), dynamicinformer.TweakListOptionsFunc(selectors(s.opts.WorkloadSelector, nil))).Informer()
		if err := inf.SetTransform(s.workloads); err != nil {
			return nil, fmt.Errorf("informer of %s: %w", k.Name(), err)
		}
		infs[ns] = inf
		out = append(out, inf)
	}
	ctx, cancel := context.WithCancel(ctx)
	for _, inf := range out {
		go inf.RunWithContext(ctx)
	}
	s.mu.Lock()
	s.byKind[k.Name()] = infs
	s.optional[k.Name()] = cancel
	s.mu.Unlock()
	return out, nil
}

// Disable stops the informers of k, an optional kind whose API is gone,
// and forgets them: from then on Get, Users and Count find no object of
// k. A reconcile that read one just before acts on a workload that is
// gone, and its patch fails as not found, which is no error.
func (s *Store) Disable(k workload.Kind) {
	s.mu.Lock()
	cancel, on := s.optional[k.Name()]
	delete(s.optional, k.Name())
	delete(s.byKind, k.Name())
	s.mu.Unlock()
	if on {
		cancel()
	}
}

// Enabled tells whether the informers of k run.
func (s *Store) Enabled(k workload.Kind) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, on := s.optional[k.Name()]
	return on
}
