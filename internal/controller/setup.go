// Package controller is watcher's controller: it watches ConfigMaps, Secrets
// and workloads, and restarts the workloads whose configuration changed.
//
// The work queue holds workload keys. ConfigMap and Secret events are mapped
// to the workloads that use the object through a cache field index (no LIST
// call, work proportional to the workloads affected); workload events enqueue
// the workload itself. Each workload is then reconciled level-triggered:
// gather its references and the current digests from the cache, let
// plan.Decide compare them with the hashes recorded on the workload, and apply
// the result with one patch.
package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

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

	r := &Reconciler{
		Cache:    mgr.GetCache(),
		Client:   mgr.GetClient(),
		Fresh:    mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorder("watcher"),
		Config:   cfg,
	}
	b := builder.TypedControllerManagedBy[workload.Key](mgr).
		Named("watcher").
		WithOptions(ctrlcontroller.TypedOptions[workload.Key]{
			MaxConcurrentReconciles: cfg.Workers,
			NeedLeaderElection:      ptr.To(cfg.NeedLeaderElection),
			EnableWarmup:            ptr.To(true),
			SkipNameValidation:      ptr.To(true),
		}).
		WithLogConstructor(func(k *workload.Key) logr.Logger {
			log := mgr.GetLogger().WithValues("controller", "watcher")
			if k != nil {
				log = log.WithValues("workload", k.String())
			}
			return log
		})
	for _, kind := range workload.Kinds {
		b = b.WatchesRawSource(source.TypedKind[client.Object, workload.Key](
			mgr.GetCache(), kind.New(), workloadHandler(kind.Name),
			predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{})))
	}
	for _, rk := range []refs.Kind{refs.ConfigMap, refs.Secret} {
		h := &configHandler{kind: rk, reader: mgr.GetCache(), cfg: cfg, log: mgr.GetLogger().WithValues("controller", "watcher")}
		var obj client.Object = &corev1.ConfigMap{}
		if rk == refs.Secret {
			obj = &corev1.Secret{}
		}
		b = b.WatchesRawSource(source.TypedKind[client.Object, workload.Key](mgr.GetCache(), obj, h.funcs()))
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
func workloadHandler(kind string) handler.TypedEventHandler[client.Object, workload.Key] {
	return handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []workload.Key {
		return []workload.Key{workload.KeyOf(kind, obj)}
	})
}
