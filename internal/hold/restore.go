package hold

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/watcher-dev/watcher/internal/evict"
	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Restore: a new process (or a new leader) knows the rollouts watcher
// started before it, in progress or failed, from the state kept on the
// workloads (guard.StateAnnotation), before it admits a restart: a restart
// held by a failed rollout would otherwise go ahead if its workload came
// up in the queue before the failed one. Each kind of workload is restored
// once, in one pass over the cache (no request), as soon as its informers
// have synced:
//
//	last restart (its state) restored as
//	by a patch (annotation   Observe: in progress while the cache says its
//	  or env), or none       rollout is not done, at the generation watcher
//	                         wrote; failed, quietly, past the rollout timeout
//	by eviction (the state   in progress from the restart (failed, quietly,
//	  says so: State.Evict)  past the timeout) until the controller, which
//	                         lists its pods, says it is done (Evicting): its
//	                         rollout shows neither in its status nor in its
//	                         generation; nothing if the workload is marked
//	                         done for that restart (evict.IsDone)
//	of an optional kind      restored when its informers have synced, if
//	  (Argo Rollout)         it is served later (restored again if its
//	                         API goes and comes back)
//
// Until every kind is restored (Config.Known says the optional kinds
// served were looked up, and their informers have synced), restarts wait,
// silently, and are decided again every restoreRetry; at most restoreWait
// from the first that waited, so that an informer that never syncs (a
// custom resource watcher may not read) does not stop every restart.

// restoreRetry is how often a restart waiting for restore is decided
// again.
const restoreRetry = time.Second

// restoreWait bounds how long restarts wait for restore.
const restoreWait = 30 * time.Second

// restoring is what restore knows: the kinds restored, and since when
// restarts wait.
type restoring struct {
	mu      sync.Mutex
	kinds   map[string]bool
	since   time.Time // zero: none waits
	expired bool      // restoreWait passed: nothing waits any more
}

// restore restores the kinds whose informers have synced and that are not
// restored yet, and reports whether restarts must still wait.
func (g *Guards) restore(ctx context.Context) (wait bool) {
	if g.store == nil {
		return false
	}
	r := &g.restoring
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kinds == nil {
		r.kinds = map[string]bool{}
	}
	pending := g.cfg.Known != nil && !g.cfg.Known()
	for _, kind := range workload.Kinds {
		if r.kinds[kind.Name()] {
			continue
		}
		infs := g.store.Informers(kind.Name())
		if len(infs) == 0 {
			continue // not served, or not watched
		}
		synced := true
		for _, inf := range infs {
			synced = synced && inf.HasSynced()
		}
		if !synced {
			pending = true
			continue
		}
		g.restoreKind(ctx, kind.Name())
		r.kinds[kind.Name()] = true
	}
	if !pending || r.expired {
		r.since = time.Time{}
		return false
	}
	now := g.now()
	if r.since.IsZero() {
		r.since = now
	}
	if now.Sub(r.since) >= restoreWait {
		r.expired = true
		ctrl.LoggerFrom(ctx).Info("Restarts no longer wait for the guards' state of every kind: an informer has not synced",
			"waited", restoreWait.String())
		return false
	}
	return true
}

// restoreKind observes every workload of kind in the store that carries
// the guards' state or is rolling.
func (g *Guards) restoreKind(ctx context.Context, kind string) {
	objs, err := g.store.Workloads(kind, metav1.NamespaceAll)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Cannot read the guards' state from the cache", "kind", kind)
		return
	}
	n := 0
	for _, o := range objs {
		_, state := o.Annotation(guard.StateAnnotation)
		_, rolling := o.Annotation(guard.RollingAnnotation)
		if !state && !rolling {
			continue
		}
		key := object.Ref{Kind: kind, Namespace: o.GetNamespace(), Name: o.GetName()}
		meta := o.Meta()
		if st, ok := g.state(meta); ok && st.Evict {
			// A restart by eviction (the state says so): unless marked
			// done, not known to be done until its pods are listed: in
			// progress, or failed if older than the timeout.
			if g.cfg.Sign == nil || !evict.IsDone(meta.GetAnnotations(), st.At, string(meta.GetUID()), evict.Signer(g.cfg.Sign)) {
				g.rollouts.SeenEvicting(key, st, true, g.now())
			}
		} else {
			g.Observe(ctx, key, meta, false)
		}
		n++
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Guards' state restored from the cluster", "kind", kind, "workloads", n)
}

// waitRestore decides key again in restoreRetry: its restart waits for
// restore.
func (g *Guards) waitRestore(ctx context.Context, key object.Ref) {
	g.mu.Lock()
	g.waiting[key] = true
	g.mu.Unlock()
	g.wakeAt(ctx, key, g.now().Add(restoreRetry))
}

// forgetKind makes restore observe the workloads of kind again, once its
// informers run and have synced: its API went away.
func (g *Guards) forgetKind(kind string) {
	g.restoring.mu.Lock()
	defer g.restoring.mu.Unlock()
	delete(g.restoring.kinds, kind)
}
