package controller

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/watcher-dev/watcher/internal/evict"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Warning Events of a workload restarted by the evict strategy (package
// evict emits them).
const (
	ReasonEvictionBlocked   = evict.ReasonBlocked
	ReasonEvictionForbidden = evict.ReasonForbidden
)

// Eviction is the look at the restart by eviction of a workload that its
// walk left not done (evictions): only the eviction step runs, not the
// walk, so that a workload is not gathered and decided again at every
// look. An event of the workload enqueues a Workload, whose walk looks
// too.
type Eviction struct{ object.Ref }

func (Eviction) request() {}

// evictStep carries on, level-triggered, the evict restart of key, if it
// has one that is not done (evict.Progress.Step), and returns when to look
// again. Whether the workload is restarted by eviction is read from w,
// what its walk gathered, unless w is nil (an Eviction, or nothing
// gathered) or the store holds another version of it now: then its facts
// are gathered again (no decision); observe (an Eviction): the guards
// observe it then, as its walk would have.
func (r *Reconciler) evictStep(ctx context.Context, key workload.Key, w *gathered, observe bool) (time.Duration, error) {
	kind, _ := workload.ByName(key.Kind)
	cached, err := r.Store.Get(key.Kind, key.Namespace, key.Name)
	if err == nil && cached == nil {
		r.evictions.Tracker.Forget(key) // deleted
	}
	if err != nil || cached == nil {
		return 0, err
	}
	if w == nil || !w.of(cached) {
		if w, err = r.facts(key, cached); err != nil {
			return 0, nil
		}
		if observe {
			r.guards.Observe(ctx, key, cached, w.evicts())
		}
	}
	if !w.evicts() {
		return 0, nil
	}
	at, ok := r.guards.RestartedAt(cached)
	if !ok || at.Unix() <= 0 {
		return 0, nil
	}
	return r.evictions.Step(ctx, key, kind, cached, at), nil
}

// touching is the handler h of a workload kind's events that first tells
// the evictions' tracker of each update (the workload's generation,
// annotations, or readiness as the cache shows it, changed): its restart
// by eviction is then looked at at once, backoff reset, and resumed if it
// was past its timeout. Creations are not updates: the first list of a
// new process or leader resumes nothing.
func (r *Reconciler) touching(kind string, h handler.TypedEventHandler[client.Object, Request]) handler.TypedEventHandler[client.Object, Request] {
	return touchHandler{TypedEventHandler: h, kind: kind, tracker: &r.evictions.Tracker, releases: &r.releases}
}

type touchHandler struct {
	handler.TypedEventHandler[client.Object, Request]
	kind     string
	tracker  *evict.Tracker
	releases *workload.Releases
}

// Update implements handler.TypedEventHandler; the template changes are
// told to releases (workload.Releases) before the workload is queued.
func (t touchHandler) Update(ctx context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[Request]) {
	t.releases.Observe(e.ObjectOld, e.ObjectNew)
	t.tracker.Touch(object.Ref{Kind: t.kind, Namespace: e.ObjectNew.GetNamespace(), Name: e.ObjectNew.GetName()})
	t.TypedEventHandler.Update(ctx, e, q)
}

// Delete implements handler.TypedEventHandler.
func (t touchHandler) Delete(ctx context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[Request]) {
	t.releases.Forget(e.Object)
	t.TypedEventHandler.Delete(ctx, e, q)
}
