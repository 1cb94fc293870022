package controller

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watcher-dev/watcher/internal/evict"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/note"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/workload"
)

// ReasonEvictionBlocked is the Warning Event of a workload restarted by
// the evict strategy whose next eviction a PodDisruptionBudget refuses.
const ReasonEvictionBlocked = "EvictionBlocked"

// evictEvery is how often the pods of a workload restarted by eviction are
// looked at while some remain to replace: the readiness of its pods is
// not watched (no pod informer), so the progress is polled.
const evictEvery = 2 * time.Second

// evictBlockedEvery is how often an eviction a PodDisruptionBudget refused
// is tried again: the budget changes with the pods' readiness, or when a
// person relaxes it, and each try is a GET, a LIST and an eviction.
const evictBlockedEvery = 5 * time.Second

// evictions remembers, per workload, the restart time whose evictions
// are done, so that a settled workload is not listed again at each of
// its reconciles, and the last refusal reported, so that it is said once.
// It is only a memory: lost at a restart of watcher, whose first look at
// each workload then lists its pods once.
type evictions struct {
	mu      sync.Mutex
	done    map[workload.Key]time.Time
	blocked map[workload.Key]string
}

// evictStep carries on, level-triggered, the evict restart of key, if it
// has one that is not done: the pods created before the restart time kept
// on the workload are evicted in the order and at the pace evict.Next
// decides. It returns when to look again. The pods are listed by the
// workload's selector in its namespace, from the API server.
func (r *Reconciler) evictStep(ctx context.Context, key workload.Key) (reconcile.Result, error) {
	kind, _ := workload.ByName(key.Kind)
	cached, err := r.Store.Get(key.Kind, key.Namespace, key.Name)
	if err == nil && cached == nil {
		r.evicted.forget(key) // deleted
	}
	if err != nil || cached == nil || !r.evicts(key, cached) {
		return reconcile.Result{}, err
	}
	at, ok := r.guards.RestartedAt(cached)
	if !ok || at.Unix() <= 0 || r.evicted.isDone(key, at) {
		return reconcile.Result{}, nil
	}
	obj := kind.New()
	if err := r.Fresh.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: key.Name}, obj); err != nil {
		metrics.Errors.WithLabelValues("get").Inc()
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	pods, err := evict.Pods(ctx, r.Fresh, obj)
	if err != nil {
		metrics.Errors.WithLabelValues("list").Inc()
		return reconcile.Result{}, err
	}
	in := evict.Input{At: at}
	in.Want, in.Allowance, in.Order = evict.Allowance(obj)
	byName := map[string]*corev1.Pod{}
	for i := range pods {
		in.Pods = append(in.Pods, evict.FromPod(&pods[i]))
		byName[pods[i].Name] = &pods[i]
	}
	d := evict.Next(in)
	r.guards.Evicting(ctx, key, cached, !d.Done)
	log := ctrl.LoggerFrom(ctx)
	if d.Done {
		r.evicted.setDone(key, at)
		log.V(1).Info("Restart by eviction done", "restartedAt", at)
		return reconcile.Result{}, nil
	}
	after := evictEvery
	for _, name := range d.Evict {
		err := evict.Evict(ctx, r.Client, byName[name])
		if msg, blocked := evict.Blocked(err); blocked {
			after = evictBlockedEvery
			if r.evicted.refused(key, msg) {
				log.Info("Eviction refused by a PodDisruptionBudget; trying again", "pod", key.Namespace+"/"+name, "why", msg)
				r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonEvictionBlocked, "Evict", "%s",
					note.Truncate("Cannot evict pod "+name+" to restart: "+msg))
			}
			break
		}
		if err != nil {
			metrics.Errors.WithLabelValues("evict").Inc()
			return reconcile.Result{}, err
		}
		r.evicted.refused(key, "")
		log.Info("Pod evicted to restart the workload", "pod", key.Namespace+"/"+name, "oldPods", d.Old, "restartedAt", at)
	}
	return reconcile.Result{RequeueAfter: after}, nil
}

// evicts reports whether obj, the workload key from the store, has its
// pods evicted by watcher to restart: a Deployment, StatefulSet or
// DaemonSet (an Argo Rollout's evict is Argo's restartAt; a CronJob has no
// pods of its own) whose strategy (annotation, policies, flag) is evict,
// not in dry-run.
func (r *Reconciler) evicts(key workload.Key, obj client.Object) bool {
	switch key.Kind {
	case "Deployment", "StatefulSet", "DaemonSet":
	default:
		return false
	}
	uses, err := r.resolve.Resolve(obj, r.Store)
	if err != nil {
		return false
	}
	applied, err := r.applied(obj, uses)
	if err != nil || r.dryFor(obj, applied) != nil {
		return false
	}
	s, _ := restart.For(obj, r.defaultStrategy(applied)) // reported by apply
	_, ok := s.(restart.Evict)
	return ok
}

func (e *evictions) isDone(key workload.Key, at time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	t, ok := e.done[key]
	return ok && t.Equal(at)
}

func (e *evictions) setDone(key workload.Key, at time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done == nil {
		e.done = map[workload.Key]time.Time{}
	}
	e.done[key] = at
	delete(e.blocked, key)
}

func (e *evictions) forget(key workload.Key) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.done, key)
	delete(e.blocked, key)
}

// refused records the last refusal of key's evictions ("" for none) and
// reports whether it is new.
func (e *evictions) refused(key workload.Key, msg string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.blocked == nil {
		e.blocked = map[workload.Key]string{}
	}
	if e.blocked[key] == msg {
		return false
	}
	if msg == "" {
		delete(e.blocked, key)
		return false
	}
	e.blocked[key] = msg
	return true
}
