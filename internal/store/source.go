package store

import (
	"context"
	"errors"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/watcher-dev/watcher/internal/workload"
)

// Syncing returns a source, for a controller of requests R, on inf, an
// informer of the store: the controller waits for it to sync before it
// starts its workers, as for the sources of controller-runtime's own
// cache, so that a change is never processed against a half-filled index.
func Syncing[R comparable](inf toolscache.SharedIndexInformer, h handler.TypedEventHandler[client.Object, R], p ...predicate.TypedPredicate[client.Object]) source.TypedSyncingSource[R] {
	return &syncingInformer[R]{
		TypedInformer: source.TypedInformer[client.Object, R]{Informer: inf, Handler: h, Predicates: p},
		inf:           inf,
	}
}

// syncingInformer is the source of Syncing.
type syncingInformer[R comparable] struct {
	source.TypedInformer[client.Object, R]
	inf toolscache.SharedIndexInformer
}

// WaitForSync implements source.TypedSyncingSource.
func (s *syncingInformer[R]) WaitForSync(ctx context.Context) error {
	if !toolscache.WaitForCacheSync(ctx.Done(), s.inf.HasSynced) {
		return fmt.Errorf("informer did not sync: %w", ctx.Err())
	}
	return nil
}

// OptionalWorkload is an optional workload kind (Argo's Rollout), kept in
// the store while its API is served; its informers become sources of a
// controller of requests R. It is followed by served.Kinds (it is a
// served.Optional).
type OptionalWorkload[R comparable] struct {
	Kind  workload.Kind
	Store *Store
	// Watch makes a source one of the controller's (controller.Watch).
	Watch func(source.TypedSource[R]) error
	// Handler and Predicates are those of the sources.
	Handler    handler.TypedEventHandler[client.Object, R]
	Predicates []predicate.TypedPredicate[client.Object]
	// Gone is told when the kind is no longer served.
	Gone func(kind string)
}

// Name names the kind in logs.
func (w *OptionalWorkload[R]) Name() string { return w.Kind.Name() }

// APIVersion is the kind's group version.
func (w *OptionalWorkload[R]) APIVersion() string { return w.Kind.APIVersion() }

// Resource is the kind's resource (plural, lower case).
func (w *OptionalWorkload[R]) Resource() string { return w.Kind.Resource }

// Enabled tells whether the store watches the kind.
func (w *OptionalWorkload[R]) Enabled() bool { return w.Store.Enabled(w.Kind) }

// Disable stops the kind's informers and forgets what the guards kept of
// its workloads (their rollouts, failures and waits).
func (w *OptionalWorkload[R]) Disable() {
	w.Store.Disable(w.Kind)
	if w.Gone != nil {
		w.Gone(w.Kind.Name())
	}
}

// Enable starts the kind's informers in the store and makes each a source
// of the controller.
func (w *OptionalWorkload[R]) Enable(ctx context.Context) error {
	infs, err := w.Store.Enable(ctx, w.Kind)
	if err != nil {
		return err
	}
	var errs []error
	for _, inf := range infs {
		errs = append(errs, w.Watch(&optionalSource[R]{inf: inf, TypedInformer: source.TypedInformer[client.Object, R]{
			Informer: inf, Handler: w.Handler, Predicates: w.Predicates,
		}}))
	}
	return errors.Join(errs...)
}

// optionalSource is the source of an optional kind's informer. Unlike
// Syncing's, the controller does not wait for it to sync (the kind's API
// may go away first; each workload is reconciled as the informer adds it),
// and a stopped informer (its kind disabled before the controller started,
// on a standby) starts as a source that never fires rather than failing
// the controller.
type optionalSource[R comparable] struct {
	source.TypedInformer[client.Object, R]
	inf toolscache.SharedIndexInformer
}

// Start implements source.TypedSource.
func (s *optionalSource[R]) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[R]) error {
	if s.inf.IsStopped() {
		return nil
	}
	if err := s.TypedInformer.Start(ctx, q); err != nil && !s.inf.IsStopped() {
		return err
	}
	return nil
}
