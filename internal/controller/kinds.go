package controller

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/watcher-dev/watcher/internal/served"
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
// them, without a restart of watcher. It follows each one through
// package served (a watch of their CRDs: discovery is asked at start and
// when a CRD changes, not every few seconds) and acts on each answer:
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
	apis   []optionalAPI
	served *served.Watcher
	log    logr.Logger

	mu       sync.Mutex
	answered map[string]bool // the APIs asked about once, by name
}

// NeedLeaderElection is false: see optionalKinds.
func (o *optionalKinds) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable: it follows every optional API until
// ctx is done. The answers about one API come one at a time, so its Enable
// and Disable are never called at once.
func (o *optionalKinds) Start(ctx context.Context) error {
	for _, a := range o.apis {
		o.served.Follow(served.API{GroupVersion: a.APIVersion(), Resource: a.Resource()},
			func(ctx context.Context, ans served.Answer) time.Duration {
				return o.apply(ctx, a, ans)
			})
	}
	<-ctx.Done()
	return nil
}

// answer notes that the API called name was asked about.
func (o *optionalKinds) answer(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.answered == nil {
		o.answered = map[string]bool{}
	}
	o.answered[name] = true
}

// Checked is a readiness check: it passes once every optional API was
// asked about once (answered or not), so that a watcher reported ready
// follows the optional APIs the API server serves (their informers then
// start; what is created before they have listed is found, not reported
// as created). A failed discovery call counts as asked: readiness never
// waits on discovery.
func (o *optionalKinds) Checked(*http.Request) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, a := range o.apis {
		if !o.answered[a.Name()] {
			return fmt.Errorf("%s not looked up in discovery yet", a.Name())
		}
	}
	return nil
}

// retryEnable is how long to wait before asking again about an API that
// could not be enabled.
const retryEnable = 10 * time.Second

// apply enables a if it is served and disables it if it is not; it
// returns how long to wait before asking again (see served.Func).
func (o *optionalKinds) apply(ctx context.Context, a optionalAPI, ans served.Answer) time.Duration {
	defer o.answer(a.Name())
	switch {
	case !ans.Known:
	case ans.Served && !a.Enabled():
		if err := a.Enable(ctx); err != nil {
			o.log.Error(err, "Cannot watch kind", "kind", a.Name())
			return retryEnable
		}
		o.log.Info("Kind served; watching it", "kind", a.Name(), "apiVersion", a.APIVersion())
	case !ans.Served && a.Enabled():
		a.Disable()
		o.log.Info("Kind no longer served; stopped watching it", "kind", a.Name(), "apiVersion", a.APIVersion())
	}
	return 0
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
