package controller

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/watcher-dev/watcher/internal/store"
	"github.com/watcher-dev/watcher/internal/workload"
)

// optionalKinds watches the optional workload kinds (custom resources such
// as Argo's Rollout) only while the API server serves them, without a
// restart of watcher. Every interval it asks the discovery API whether each
// optional kind is served:
//
//	served  enabled  action
//	yes     no       the store starts the kind's informers; each becomes a
//	                 source of the controller (Watch works after start)
//	no      yes      the store stops them and forgets the kind's objects
//	unknown any      nothing (a failed discovery call changes nothing)
//
// It runs on every replica, like the store, so that a standby's caches are
// as warm as the leader's.
type optionalKinds struct {
	store     *store.Store
	discovery discovery.DiscoveryInterface
	watch     func(source.TypedSource[Request]) error
	interval  time.Duration
	log       logr.Logger
}

// NeedLeaderElection is false: see optionalKinds.
func (o *optionalKinds) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable: it looks at once, then every interval.
func (o *optionalKinds) Start(ctx context.Context) error {
	wait.UntilWithContext(ctx, o.check, o.interval)
	return nil
}

// check enables the optional kinds that are served and disables those
// that are not.
func (o *optionalKinds) check(ctx context.Context) {
	for _, k := range workload.Kinds {
		if !k.Optional {
			continue
		}
		served, known := o.served(k)
		switch {
		case !known:
		case served && !o.store.Enabled(k):
			o.enable(ctx, k)
		case !served && o.store.Enabled(k):
			o.store.Disable(k)
			o.log.Info("Kind no longer served; stopped watching it", "kind", k.Name(), "apiVersion", k.APIVersion())
		}
	}
}

func (o *optionalKinds) enable(ctx context.Context, k workload.Kind) {
	infs, err := o.store.Enable(ctx, k)
	if err != nil {
		o.log.Error(err, "Cannot watch kind", "kind", k.Name())
		return
	}
	for _, inf := range infs {
		if err := o.watch(&optionalSource{inf: inf, TypedInformer: source.TypedInformer[client.Object, Request]{
			Informer: inf, Handler: workloadHandler(k.Name()), Predicates: []predicate.TypedPredicate[client.Object]{workloadChanged()},
		}}); err != nil {
			o.log.Error(err, "Cannot watch kind", "kind", k.Name())
		}
	}
	o.log.Info("Kind served; watching it", "kind", k.Name(), "apiVersion", k.APIVersion())
}

// served tells whether the API server serves k; known is false when
// discovery failed for another reason than the group version's absence.
func (o *optionalKinds) served(k workload.Kind) (served, known bool) {
	list, err := o.discovery.ServerResourcesForGroupVersion(k.APIVersion())
	if apierrors.IsNotFound(err) {
		return false, true
	}
	if err != nil {
		o.log.V(1).Info("Cannot tell whether kind is served", "kind", k.Name(), "error", err.Error())
		return false, false
	}
	for _, r := range list.APIResources {
		if r.Name == k.Resource {
			return true, true
		}
	}
	return false, true
}

// optionalSource is the source of an optional kind's informer. Unlike
// syncingInformer, the controller does not wait for it to sync (the kind's
// API may go away first; each workload is reconciled as the informer adds
// it), and a stopped informer (its kind disabled before the controller
// started, on a standby) starts as a source that never fires rather than
// failing the controller.
type optionalSource struct {
	source.TypedInformer[client.Object, Request]
	inf toolscache.SharedIndexInformer
}

// Start implements source.TypedSource.
func (s *optionalSource) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[Request]) error {
	if s.inf.IsStopped() {
		return nil
	}
	if err := s.TypedInformer.Start(ctx, q); err != nil && !s.inf.IsStopped() {
		return err
	}
	return nil
}
