package controller

import (
	"context"
	"errors"
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

// optionalAPI is something watched only while the API server serves its
// resource: an optional workload kind (Argo's Rollout) or SealedSecrets.
type optionalAPI interface {
	// Name names it in logs: "Rollout", "SealedSecret".
	Name() string
	// APIVersion and Resource are the group version and the resource
	// (plural, lower case) looked up in discovery.
	APIVersion() string
	Resource() string
	// Enabled tells whether it is watched.
	Enabled() bool
	// Enable starts watching it; Disable stops and forgets it.
	Enable(ctx context.Context) error
	Disable()
}

// optionalKinds watches the optional APIs (custom resources such as Argo's
// Rollout or Bitnami's SealedSecret) only while the API server serves
// them, without a restart of watcher. Every interval it asks the discovery
// API whether each one is served:
//
//	served  enabled  action
//	yes     no       Enable: for a workload kind, the store starts the
//	                 kind's informers and each becomes a source of the
//	                 controller (Watch works after start)
//	no      yes      Disable: the informers stop and their objects are
//	                 forgotten
//	unknown any      nothing (a failed discovery call changes nothing)
//
// It runs on every replica, like the store, so that a standby's caches are
// as warm as the leader's.
type optionalKinds struct {
	apis      []optionalAPI
	discovery discovery.DiscoveryInterface
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

// check enables the optional APIs that are served and disables those
// that are not.
func (o *optionalKinds) check(ctx context.Context) {
	for _, a := range o.apis {
		served, known := o.served(a)
		switch {
		case !known:
		case served && !a.Enabled():
			if err := a.Enable(ctx); err != nil {
				o.log.Error(err, "Cannot watch kind", "kind", a.Name())
				continue
			}
			o.log.Info("Kind served; watching it", "kind", a.Name(), "apiVersion", a.APIVersion())
		case !served && a.Enabled():
			a.Disable()
			o.log.Info("Kind no longer served; stopped watching it", "kind", a.Name(), "apiVersion", a.APIVersion())
		}
	}
}

// served tells whether the API server serves a; known is false when
// discovery failed for another reason than the group version's absence.
func (o *optionalKinds) served(a optionalAPI) (served, known bool) {
	list, err := o.discovery.ServerResourcesForGroupVersion(a.APIVersion())
	if apierrors.IsNotFound(err) {
		return false, true
	}
	if err != nil {
		o.log.V(1).Info("Cannot tell whether kind is served", "kind", a.Name(), "error", err.Error())
		return false, false
	}
	for _, r := range list.APIResources {
		if r.Name == a.Resource() {
			return true, true
		}
	}
	return false, true
}

// optionalWorkload is an optional workload kind, kept in the store; its
// informers become sources of the controller.
type optionalWorkload struct {
	kind  workload.Kind
	store *store.Store
	watch func(source.TypedSource[Request]) error
	// gone is told when the kind is no longer served.
	gone func(kind string)
}

func (w *optionalWorkload) Name() string       { return w.kind.Name() }
func (w *optionalWorkload) APIVersion() string { return w.kind.APIVersion() }
func (w *optionalWorkload) Resource() string   { return w.kind.Resource }
func (w *optionalWorkload) Enabled() bool      { return w.store.Enabled(w.kind) }

// Disable stops the kind's informers and forgets what the guards kept of
// its workloads (their rollouts, failures and waits).
func (w *optionalWorkload) Disable() {
	w.store.Disable(w.kind)
	if w.gone != nil {
		w.gone(w.kind.Name())
	}
}

// Enable starts the kind's informers in the store and makes each a source
// of the controller.
func (w *optionalWorkload) Enable(ctx context.Context) error {
	infs, err := w.store.Enable(ctx, w.kind)
	if err != nil {
		return err
	}
	var errs []error
	for _, inf := range infs {
		errs = append(errs, w.watch(&optionalSource{inf: inf, TypedInformer: source.TypedInformer[client.Object, Request]{
			Informer: inf, Handler: workloadHandler(w.kind.Name()), Predicates: []predicate.TypedPredicate[client.Object]{workloadChanged()},
		}}))
	}
	return errors.Join(errs...)
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
