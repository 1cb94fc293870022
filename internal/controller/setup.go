// Package controller is watcher's controller: it watches ConfigMaps, Secrets
// and workloads, and restarts the workloads whose configuration changed.
//
// ConfigMaps, Secrets and workloads are kept, as small metadata-only
// objects, in the informers of package store. The work queue holds three
// kinds of Request. A workload event enqueues the workload. A data change of a
// ConfigMap or Secret enqueues the change; the replica that takes the
// change's lock (see package lock) processes it: it finds the workloads that
// use the object through an informer index (no LIST call, work proportional
// to the workloads affected) and reconciles each of them.
//
// A workload is reconciled level-triggered: gather its references and the
// current digests from the store, let plan.Decide compare them with the
// hashes recorded on the workload, and apply the result with one patch.
// A restart by eviction left not done is looked at again by an Eviction,
// the third kind of Request, which runs only the eviction step.
package controller

import (
	"context"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/watcher-dev/watcher/internal/alert"
	"github.com/watcher-dev/watcher/internal/attribution"
	"github.com/watcher-dev/watcher/internal/csi"
	"github.com/watcher-dev/watcher/internal/debounce"
	"github.com/watcher-dev/watcher/internal/dryrun"
	"github.com/watcher-dev/watcher/internal/evict"
	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/hold"
	"github.com/watcher-dev/watcher/internal/lock"
	"github.com/watcher-dev/watcher/internal/namespaces"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/resolve"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/selection"
	"github.com/watcher-dev/watcher/internal/served"
	"github.com/watcher-dev/watcher/internal/settings"
	"github.com/watcher-dev/watcher/internal/snapshot"
	"github.com/watcher-dev/watcher/internal/store"
	"github.com/watcher-dev/watcher/internal/trigger"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Request is an item of the work queue: a Change, a Workload or an
// Eviction. Items name
// objects, never versions: the queue holds at most one item per object,
// however many times it changes, and what changed (its resourceVersion,
// its keys) is read when the item is processed.
type Request interface {
	// String names the object in logs: "Kind namespace/name".
	String() string
	request()
}

// Change is a ConfigMap or Secret whose data (or, for its users' records,
// labels or annotations) changed: its users are decided on the replica
// that takes the change's lock.
type Change struct{ object.Ref }

// Workload is a workload to reconcile.
type Workload struct{ object.Ref }

// (Eviction, the third kind, is in evict.go.)

func (Change) request()   {}
func (Workload) request() {}

// Config is what the controller needs from watcher's options.
type Config struct {
	// Settings are the installation's settings that decide (the opt-out
	// annotation, discovery, reload on create and delete): the rules are
	// built from them (Settings.Rules), as the explain command builds its
	// own.
	settings.Settings
	// Coalesce is the quiet time after which a changed object is handled,
	// so that a burst of changes is handled once; CoalesceMax bounds the
	// wait under a never-ending stream of changes.
	Coalesce, CoalesceMax time.Duration
	// Namespace is watcher's own namespace: the records of Job
	// re-creations are kept there (package restart); "" is "default".
	Namespace string
	// Own are watcher's own objects (its published settings, its hash
	// key): their writes are not changes of any workload's configuration.
	Own []object.Ref
	// CronJobTrigger creates a Job from a CronJob just restarted (package
	// trigger).
	CronJobTrigger bool
	// DryRun decides as usual but writes nothing to workloads (see package
	// dryrun).
	DryRun bool
	// CacheSyncTimeout bounds the wait for the informers at start-up.
	CacheSyncTimeout time.Duration
	// Workers is the number of workloads reconciled in parallel.
	Workers int
	// Strategy writes restarts, unless a workload's
	// restart.StrategyAnnotation names another; nil: restart.Default.
	Strategy restart.Strategy
	// NeedLeaderElection: the controller runs only on the leader.
	NeedLeaderElection bool
	// Hasher made the digests in the store; it digests objects read from
	// the API server alike.
	Hasher *hash.Hasher
	// Key, when set, tells whether Hasher's key is still the installation's
	// hash key; nothing is decided with a key that is not.
	Key *hash.Guard
	// Resolver gives the references of workloads; the store's index must
	// use the same. Nil: the pod spec's, none ignored.
	Resolver *resolve.Resolver
	// Locker decides which replica processes a change.
	Locker lock.Locker
	// HeldRetry is how long to wait before looking again at a change whose
	// lock another replica holds.
	HeldRetry time.Duration
	// Guards hold restarts that would be a storm; the zero value holds
	// nothing.
	Guards hold.Config
	// Alerts, when set, is told of every restart (see package alert).
	Alerts alert.Notifier
	// Policies are the ReloadPolicies; nil: none.
	Policies *Policies
	// Snapshots, when set (--pinning), makes the snapshots of the
	// restarts of workloads that pin their config (package pin).
	Snapshots *snapshot.Maker
	// SnapshotView sees every snapshot and pinned revision
	// (snapshot.Owners); nil: the API server is asked.
	SnapshotView SnapshotView
	// CSI, when set, follows the Secrets Store CSI Driver's
	// SecretProviderClassPodStatuses while their API is served (see
	// package csi and mounted); New fills its Enqueue.
	CSI *csi.Options
}

// New returns the Reconciler of cfg: it reads from st (its informers are
// the controller's sources) and from the API server (fresh), writes with c
// and emits Events with rec. Setup and the unit tests build it alike.
func New(st *store.Store, c client.Client, fresh client.Reader, rec recorder.EventRecorder, cfg Config) *Reconciler {
	if cfg.Locker == nil {
		cfg.Locker = lock.Local{}
	}
	if cfg.Resolver == nil {
		cfg.Resolver = cfg.Settings.Resolver(nil)
	}
	if cfg.Strategy == nil {
		cfg.Strategy = restart.Default
	}
	if cfg.HeldRetry == 0 {
		cfg.HeldRetry = time.Second
	}
	r := &Reconciler{
		Store:    st,
		Client:   c,
		Fresh:    fresh,
		Recorder: rec,
		Config:   cfg,
		resolve:  cfg.Resolver,
		rules:    cfg.Settings.Rules(),
	}
	r.changedBy = attribution.NewChangedBy()
	r.producerWakes.Users = r.usersOf
	r.pinner = &snapshot.Pinner{Maker: cfg.Snapshots, View: cfg.SnapshotView, Client: r.Client, Fresh: r.Fresh, Recorder: r.Recorder}
	if cfg.CronJobTrigger {
		r.cronJobs = &trigger.Trigger{Client: r.Client, Fresh: r.Fresh, Recorder: r.Recorder}
	}
	if cfg.DryRun {
		r.dry = dryrun.New()
	}
	if cfg.Policies != nil {
		r.policyDry = dryrun.New()
	}
	var sign evict.Signer
	if cfg.Hasher != nil {
		sign = cfg.Hasher.MAC
	}
	var workloads hold.Workloads // nil without a store, not a nil *store.Store
	if st != nil {
		workloads = st
	}
	r.guards = hold.New(cfg.Guards, workloads, r.Recorder)
	r.evictions = &evict.Progress{Client: c, Fresh: fresh, Recorder: rec, Sign: sign, StateKey: guard.StateAnnotation,
		Now: cfg.Guards.Now, Rollouts: r.guards}
	r.evictions.Tracker.Timeout = cfg.Guards.RolloutTimeout
	r.pending = lock.NewPending(cfg.Locker)
	r.kinds = newChangeKinds()
	if st != nil && len(st.Informers(workload.Job.Name())) > 0 {
		r.recreations = newRecreator(r, cfg)
	}
	if st != nil && len(st.Informers(store.KindNamespace)) > 0 { // with a namespace selector
		r.selection = selection.New()
	}
	if co := cfg.CSI; co != nil {
		r.rotated = make(chan event.TypedGenericEvent[object.Ref])
		co.Enqueue = func(ctx context.Context, k object.Ref) {
			select { // blocks on a standby until it leads
			case r.rotated <- event.TypedGenericEvent[object.Ref]{Object: k}:
			case <-ctx.Done():
			}
		}
		r.mounts = csi.NewWatcher(*co)
	}
	return r
}

// Helpers are the helpers New made for a Reconciler that run beside it
// (package app adds them to the manager): nil when off.
type Helpers struct {
	// Guards hold restarts that would be a storm; their sweeper runs.
	Guards *hold.Guards
	// Pending keeps the locks of held changes.
	Pending *lock.Pending
	// Recreations re-creates Jobs; its lister runs.
	Recreations *restart.Recreator
}

// Helpers returns r's helpers, for the caller to run (app.Run).
func (r *Reconciler) Helpers() Helpers {
	return Helpers{Guards: r.guards, Pending: r.pending, Recreations: r.recreations}
}

// Setup registers r with mgr as the controller "watcher", as Flux's
// SetupWithManager does: its sources (the informers of r's store, which
// must be added to mgr too, the guards' and the Job re-creations' wakes,
// the ReloadPolicies, the CSI rotations) and its workers. It returns the
// optional APIs whose informers become sources while they are served (the
// optional workload kinds, CSI), for the caller to follow (served.Kinds).
func Setup(mgr manager.Manager, r *Reconciler) ([]served.Optional, error) {
	cfg, st := r.Config, r.Store
	b := builder.TypedControllerManagedBy[Request](mgr).
		Named("watcher").
		WithOptions(ctrlcontroller.TypedOptions[Request]{
			MaxConcurrentReconciles: cfg.Workers,
			CacheSyncTimeout:        cfg.CacheSyncTimeout,
			NeedLeaderElection:      ptr.To(cfg.NeedLeaderElection),
			EnableWarmup:            ptr.To(true),
			SkipNameValidation:      ptr.To(true),
			// Failed items (an unreachable API server or Redis) are retried
			// with backoff, never dropped, and never wait more than 30s.
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[Request](50*time.Millisecond, 30*time.Second),
		}).
		WithLogConstructor(func(req *Request) logr.Logger {
			log := mgr.GetLogger().WithValues("controller", "watcher")
			switch req := derefRequest(req).(type) {
			case Change:
				log = log.WithValues("object", req.String())
			case Workload:
				log = log.WithValues("workload", req.String())
			case Eviction:
				log = log.WithValues("workload", req.String())
			}
			return log
		})
	for _, kind := range workload.Kinds {
		for _, inf := range st.Informers(kind.Name()) {
			b = b.WatchesRawSource(store.Syncing(inf, r.touching(kind.Name(), workloadHandler(kind.Name())), workloadChanged()))
		}
	}
	for _, rk := range []refs.Kind{refs.ConfigMap, refs.Secret} {
		h := &configHandler{kind: rk, cfg: cfg, log: mgr.GetLogger().WithValues("controller", "watcher"), policies: cfg.Policies}
		h.debounce = debounce.New[Request](cfg.Coalesce, cfg.CoalesceMax)
		h.kinds = r.kinds
		h.guards = r.guards
		h.changedBy = r.changedBy
		for _, inf := range st.Informers(string(rk)) {
			b = b.WatchesRawSource(store.Syncing(inf, h.funcs()))
		}
	}
	for _, inf := range st.Informers(store.KindNamespace) { // with a namespace selector
		h := namespaces.Handler[Request]{Store: st, Selection: r.selection, Log: mgr.GetLogger().WithValues("controller", "watcher"),
			Workload: func(k object.Ref) Request { return Workload{k} }}
		b = b.WatchesRawSource(store.Syncing(inf, h.Funcs()))
	}
	b = b.WatchesRawSource(&r.evictLoop)
	b = b.WatchesRawSource(&r.producerWakes)
	b = b.WatchesRawSource(source.TypedChannel(r.guards.Wakes(), handler.TypedEnqueueRequestsFromMapFunc(
		func(_ context.Context, k object.Ref) []Request { return []Request{Workload{k}} })))
	if r.recreations != nil {
		b = b.WatchesRawSource(source.TypedChannel(r.recreations.Wakes(), handler.TypedEnqueueRequestsFromMapFunc(
			func(_ context.Context, k types.NamespacedName) []Request {
				return []Request{Workload{object.Ref{Kind: workload.Job.Name(), Namespace: k.Namespace, Name: k.Name}}}
			})))
	}
	if cfg.Policies != nil && cfg.Policies.Watcher != nil {
		b = b.WatchesRawSource(policySource{p: cfg.Policies})
	}
	if r.rotated != nil {
		b = b.WatchesRawSource(source.TypedChannel(r.rotated, handler.TypedEnqueueRequestsFromMapFunc(
			func(_ context.Context, k object.Ref) []Request { return []Request{Workload{k}} })))
	}
	c, err := b.Build(r)
	if err != nil {
		return nil, err
	}
	var apis []served.Optional
	for _, k := range workload.Kinds {
		if k.Optional && !slices.Contains(cfg.Settings.IgnoreWorkloadKinds, k.Name()) {
			apis = append(apis, &store.OptionalWorkload[Request]{Kind: k, Store: st, Watch: c.Watch, Gone: r.guards.GoneKind,
				Handler: workloadHandler(k.Name()), Predicates: []predicate.TypedPredicate[client.Object]{workloadChanged()}})
		}
	}
	if r.mounts != nil {
		apis = append(apis, r.mounts)
	}
	return apis, nil
}

// workloadChanged passes the workload events that can change a decision:
// creation, and changes of the generation or the annotations.
func workloadChanged() predicate.TypedPredicate[client.Object] {
	return predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{})
}

// workloadHandler enqueues a workload when it is created (adoption, and the
// start-up check of changes made while watcher was down) and when its
// generation or annotations change (new references, opt-out).
func workloadHandler(kind string) handler.TypedEventHandler[client.Object, Request] {
	return handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []Request {
		return []Request{Workload{object.Ref{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}}}
	})
}

// derefRequest is *req, nil for a nil req.
func derefRequest(req *Request) Request {
	if req == nil {
		return nil
	}
	return *req
}
