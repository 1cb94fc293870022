package controller

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watcher-dev/watcher/internal/evict"
	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/note"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Warning Events of a workload restarted by the evict strategy.
const (
	// ReasonEvictionBlocked: a PodDisruptionBudget refuses its next
	// eviction.
	ReasonEvictionBlocked = "EvictionBlocked"
	// ReasonEvictionForbidden: watcher may not list its pods or evict
	// them (RBAC); the Event names the right missing.
	ReasonEvictionForbidden = "EvictionForbidden"
)

// evictStep carries on, level-triggered, the evict restart of key, if it
// has one that is not done: the pods created before the restart are
// evicted in the order and at the pace evict.Next decides. Nothing waits
// here: it returns when to look again, and evict.Tracker bounds the looks
// (a backoff from seconds to minutes, reset by an event of the workload;
// none past the rollout timeout until an event of the workload).
//
//	step                                          requests
//	restart done (memory or evict.DoneAnnotation) none
//	not due, or past its timeout (Tracker.Look)   none
//	look: read the workload, its ReplicaSets and  GET, LIST, LIST (namespace,
//	  its pods from the API server                selector), evictions
//	done: mark it on the workload, once           PATCH
//
// The pods are old if created before the API server's time of the
// restart's write (evict.ServerTime), watcher's own clock only for a
// restart written before that time was kept. Whether the workload is
// restarted by eviction is read from w, what its walk gathered, unless
// the store holds another version of it now.
func (r *Reconciler) evictStep(ctx context.Context, key workload.Key, w *gathered) (reconcile.Result, error) {
	kind, _ := workload.ByName(key.Kind)
	cached, err := r.Store.Get(key.Kind, key.Namespace, key.Name)
	if err == nil && cached == nil {
		r.evicted.Forget(key) // deleted
	}
	if err != nil || cached == nil {
		return reconcile.Result{}, err
	}
	if w == nil || !w.of(cached) {
		if w, err = r.facts(key, cached); err != nil {
			return reconcile.Result{}, nil
		}
	}
	if !w.evicts() {
		return reconcile.Result{}, nil
	}
	at, ok := r.guards.RestartedAt(cached)
	if !ok || at.Unix() <= 0 {
		return reconcile.Result{}, nil
	}
	if evict.IsDone(cached.GetAnnotations(), at, string(cached.GetUID()), r.signer()) {
		r.evicted.Done(key, at)
		return reconcile.Result{}, nil
	}
	log := ctrl.LoggerFrom(ctx)
	v := r.evicted.Look(key, at, r.now())
	switch {
	case v.TimedOut:
		// Its rollout failed: the guards say so (once) and hold its change.
		r.guards.Evicting(ctx, key, cached, true)
		log.V(1).Info("Restart by eviction past the rollout timeout; not looked at again until an event of the workload", "restartedAt", at)
		return reconcile.Result{}, nil
	case !v.Look:
		return reconcile.Result{RequeueAfter: v.After}, nil
	case v.Resumed:
		log.Info("Restart by eviction past the rollout timeout resumed by an event of the workload", "restartedAt", at)
	}
	obj := kind.New()
	if err := r.Fresh.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: key.Name}, obj); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return reconcile.Result{}, nil
		}
		return r.evictFailed(ctx, key, cached, at, "get", err)
	}
	pods, err := evict.Pods(ctx, r.Fresh, obj)
	if err != nil {
		return r.evictFailed(ctx, key, obj, at, "list", err)
	}
	in := evict.Input{At: at}
	if t, ok := evict.ServerTime(obj, guard.StateAnnotation); ok {
		in.At = t
	}
	in.Want, in.Allowance, in.Order = evict.Allowance(obj)
	byName := map[string]*corev1.Pod{}
	for i := range pods {
		in.Pods = append(in.Pods, evict.FromPod(&pods[i]))
		byName[pods[i].Name] = &pods[i]
	}
	d := evict.Next(in)
	r.guards.Evicting(ctx, key, cached, !d.Done)
	if d.Done {
		r.evicted.Done(key, at)
		log.V(1).Info("Restart by eviction done", "restartedAt", at)
		r.markEvicted(ctx, key, obj, at)
		return reconcile.Result{}, nil
	}
	progressed := false
	for _, name := range d.Evict {
		err := evict.Evict(ctx, r.Client, byName[name])
		if msg, blocked := evict.Blocked(err); blocked {
			if r.evicted.Say(key, at, msg) {
				log.Info("Eviction refused by a PodDisruptionBudget; trying again with backoff", "pod", key.Namespace+"/"+name, "why", msg)
				r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonEvictionBlocked, "Evict", "%s",
					note.Truncate("Cannot evict pod "+name+" to restart: "+msg))
			}
			break
		}
		if err != nil {
			return r.evictFailed(ctx, key, obj, at, "evict", err)
		}
		progressed = true
		r.evicted.Say(key, at, "")
		log.Info("Pod evicted to restart the workload", "pod", key.Namespace+"/"+name, "oldPods", d.Old, "restartedAt", at)
	}
	return reconcile.Result{RequeueAfter: r.evicted.Looked(key, at, r.now(), progressed)}, nil
}

// evictFailed handles a failed request of a look at key's restart at
// (obj, the workload). A right watcher lacks is said on the workload, in
// a Warning Event naming it, once per restart, and ends the looks until an
// event of the workload: no retry can succeed before a person grants it,
// and the rollout fails at its timeout like any other. Any other error
// (the API server unreachable, say) is retried with the looks' backoff,
// not the work queue's, so that it costs no more than a blocked restart.
func (r *Reconciler) evictFailed(ctx context.Context, key workload.Key, obj client.Object, at time.Time, op string, err error) (reconcile.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	var denied *evict.ForbiddenError
	if errors.As(err, &denied) {
		msg := "watcher may not " + denied.Right()
		if r.evicted.Say(key, at, msg) {
			metrics.Errors.WithLabelValues("evict").Inc()
			log.Info("Cannot restart by eviction: a right is missing; not retried until an event of the workload", "right", denied.Right())
			r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonEvictionForbidden, "Evict", "%s", note.Truncate(
				"Cannot restart by eviction: "+msg+" (RBAC: grant it to watcher's service account, or choose another restart strategy); "+
					"the pods were not replaced"))
		}
		r.evicted.Stopped(key, at)
		return reconcile.Result{}, nil
	}
	metrics.Errors.WithLabelValues(op).Inc()
	log.Error(err, "Restart by eviction: request failed; trying again with backoff")
	return reconcile.Result{RequeueAfter: r.evicted.Looked(key, at, r.now(), false)}, nil
}

// markEvicted writes evict.DoneAnnotation on obj, key's workload whose
// restart at is done, so that no later replica looks at it again. A
// failure is only logged: this replica remembers it, and another looks
// once.
func (r *Reconciler) markEvicted(ctx context.Context, key workload.Key, obj client.Object, at time.Time) {
	sign := r.signer()
	if sign == nil {
		return
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{ // strings always marshal
		evict.DoneAnnotation: evict.DoneMark(at, string(obj.GetUID()), sign)}}})
	if err := r.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); client.IgnoreNotFound(err) != nil {
		metrics.Errors.WithLabelValues("patch").Inc()
		ctrl.LoggerFrom(ctx).Error(err, "Cannot mark the restart by eviction done", "workload", key.String())
	}
}

// signer is the MAC of the installation's key; nil without one.
func (r *Reconciler) signer() evict.Signer {
	if r.Config.Hasher == nil {
		return nil
	}
	return r.Config.Hasher.MAC
}

// now is the controller's clock: the guards' (for tests), else time.Now.
func (r *Reconciler) now() time.Time {
	if r.Config.Guards.Now != nil {
		return r.Config.Guards.Now()
	}
	return time.Now()
}

// evicts reports whether obj, the workload key as the store holds it, has
// its pods evicted by watcher to restart (gathered.evicts), for the
// guards' restore, which looks at every workload of a kind once.
func (r *Reconciler) evicts(key workload.Key, obj client.Object) bool {
	w, err := r.facts(key, obj)
	return err == nil && w.evicts()
}

// touching is the handler h of a workload kind's events that first tells
// the evictions' tracker of each update (the workload's generation,
// annotations, or readiness as the cache shows it, changed): its restart
// by eviction is then looked at at once, backoff reset, and resumed if it
// was past its timeout. Creations are not updates: the first list of a
// new process or leader resumes nothing.
func (r *Reconciler) touching(kind string, h handler.TypedEventHandler[client.Object, Request]) handler.TypedEventHandler[client.Object, Request] {
	return touchHandler{TypedEventHandler: h, kind: kind, tracker: &r.evicted}
}

type touchHandler struct {
	handler.TypedEventHandler[client.Object, Request]
	kind    string
	tracker *evict.Tracker
}

// Update implements handler.TypedEventHandler.
func (t touchHandler) Update(ctx context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[Request]) {
	t.tracker.Touch(object.Ref{Kind: t.kind, Namespace: e.ObjectNew.GetNamespace(), Name: e.ObjectNew.GetName()})
	t.TypedEventHandler.Update(ctx, e, q)
}
