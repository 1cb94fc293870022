// Package controller is watcher's controller: it watches ConfigMaps, Secrets
// and workloads, and restarts the workloads whose configuration changed.
//
// The work queue holds two kinds of Request. A workload event enqueues the
// workload. A data change of a ConfigMap or Secret enqueues the change; the
// replica that takes the change's lock (see package lock) processes it: it
// finds the workloads that use the object through a cache field index (no
// LIST call, work proportional to the workloads affected) and reconciles each
// of them.
//
// A workload is reconciled level-triggered: gather its references and the
// current digests from the cache, let plan.Decide compare them with the
// hashes recorded on the workload, and apply the result with one patch.
package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/lock"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Field indexes on every workload kind: the "namespace/name" of each
// ConfigMap, respectively Secret, its pod template uses.
const (
	IndexConfigMaps = "watcher.spec.configMaps"
	IndexSecrets    = "watcher.spec.secrets"
)

func indexFor(kind refs.Kind) string {
	if kind == refs.Secret {
		return IndexSecrets
	}
	return IndexConfigMaps
}

// Request is an item of the work queue: a workload to reconcile, or a
// change of a ConfigMap or Secret to process.
type Request struct {
	// Kind is a workload kind, or ConfigMap or Secret.
	Kind      string
	Namespace string
	Name      string
	// Version is the resourceVersion of a changed ConfigMap or Secret: it
	// names the change alike on every replica. Empty for a workload.
	Version string
	// Keys are the changed keys, comma-separated.
	Keys string
	// Created is true when the ConfigMap or Secret was created.
	Created bool
}

// IsChange tells a change from a workload.
func (r Request) IsChange() bool {
	return r.Kind == string(refs.ConfigMap) || r.Kind == string(refs.Secret)
}

// Workload returns the workload key of a workload request.
func (r Request) Workload() workload.Key {
	return workload.Key{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
}

// String names the request in logs.
func (r Request) String() string {
	if r.IsChange() {
		return r.Kind + " " + r.Namespace + "/" + r.Name + "@" + r.Version
	}
	return r.Workload().String()
}

// Config is what the controller needs from watcher's options.
type Config struct {
	// Annotation is the opt-out annotation key.
	Annotation string
	// RestartOnCreate: see plan.Input.
	RestartOnCreate bool
	// Coalesce delays the handling of a change so that a burst is handled
	// once.
	Coalesce time.Duration
	// Workers is the number of workloads reconciled in parallel.
	Workers int
	// NeedLeaderElection: the controller runs only on the leader.
	NeedLeaderElection bool
	// Hasher made the digests in the cache; it digests objects read from
	// the API server alike.
	Hasher *hash.Hasher
	// VerifyRestarts re-reads the changed objects from the API server
	// before a restart: needed when several replicas write (the redis and
	// none modes), since this replica's cache may lag behind their records.
	VerifyRestarts bool
	// Locker decides which replica processes a change.
	Locker lock.Locker
	// HeldRetry is how long to wait before looking again at a change whose
	// lock another replica holds.
	HeldRetry time.Duration
}

// Setup registers the field indexes, the informers and the controller with
// mgr.
func Setup(ctx context.Context, mgr manager.Manager, cfg Config) error {
	for _, kind := range workload.Kinds {
		for _, rk := range []refs.Kind{refs.ConfigMap, refs.Secret} {
			if err := mgr.GetFieldIndexer().IndexField(ctx, kind.New(), indexFor(rk), indexer(rk)); err != nil {
				return fmt.Errorf("index %s by %s: %w", kind.Name, rk, err)
			}
		}
	}
	// Create the ConfigMap and Secret informers now, so that they start and
	// sync with the cache (and /readyz waits for them) on standbys too.
	for _, obj := range []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}} {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("informer for %T: %w", obj, err)
		}
	}

	if cfg.Locker == nil {
		cfg.Locker = lock.Local{}
	}
	if cfg.HeldRetry == 0 {
		cfg.HeldRetry = time.Second
	}
	r := &Reconciler{
		Cache:    mgr.GetCache(),
		Client:   mgr.GetClient(),
		Fresh:    mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorder("watcher"),
		Config:   cfg,
	}
	b := builder.TypedControllerManagedBy[Request](mgr).
		Named("watcher").
		WithOptions(ctrlcontroller.TypedOptions[Request]{
			MaxConcurrentReconciles: cfg.Workers,
			NeedLeaderElection:      ptr.To(cfg.NeedLeaderElection),
			EnableWarmup:            ptr.To(true),
			SkipNameValidation:      ptr.To(true),
			// Failed items (an unreachable API server or Redis) are retried
			// with backoff, never dropped, and never wait more than 30s.
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[Request](50*time.Millisecond, 30*time.Second),
		}).
		WithLogConstructor(func(req *Request) logr.Logger {
			log := mgr.GetLogger().WithValues("controller", "watcher")
			if req != nil && req.IsChange() {
				log = log.WithValues("change", req.String())
			} else if req != nil {
				log = log.WithValues("workload", req.String())
			}
			return log
		})
	for _, kind := range workload.Kinds {
		b = b.WatchesRawSource(source.TypedKind[client.Object, Request](
			mgr.GetCache(), kind.New(), workloadHandler(kind.Name),
			predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{})))
	}
	for _, rk := range []refs.Kind{refs.ConfigMap, refs.Secret} {
		h := &configHandler{kind: rk, cfg: cfg, log: mgr.GetLogger().WithValues("controller", "watcher")}
		var obj client.Object = &corev1.ConfigMap{}
		if rk == refs.Secret {
			obj = &corev1.Secret{}
		}
		b = b.WatchesRawSource(source.TypedKind[client.Object, Request](mgr.GetCache(), obj, h.funcs()))
	}
	return b.Complete(r)
}

// indexer returns the index function listing the objects of kind a workload
// uses.
func indexer(kind refs.Kind) client.IndexerFunc {
	return func(obj client.Object) []string {
		tmpl, err := workload.PodTemplate(obj)
		if err != nil {
			return nil
		}
		return refs.Names(obj.GetNamespace(), kind, &tmpl.Spec)
	}
}

// workloadHandler enqueues a workload when it is created (adoption, and the
// start-up check of changes made while watcher was down) and when its
// generation or annotations change (new references, opt-out).
func workloadHandler(kind string) handler.TypedEventHandler[client.Object, Request] {
	return handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []Request {
		return []Request{{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}}
	})
}
