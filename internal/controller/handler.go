package controller

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/watcher-dev/watcher/internal/attribution"
	"github.com/watcher-dev/watcher/internal/debounce"
	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/hold"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
)

type queue = workqueue.TypedRateLimitingInterface[Request]

// configHandler turns ConfigMap or Secret events into requests naming the
// object, held by the debouncer until its changes are quiet. It only
// compares digests; finding the users and deciding is the reconciler's.
type configHandler struct {
	kind     refs.Kind
	cfg      Config
	log      logr.Logger
	debounce *debounce.Debouncer[Request]
	// kinds says which enqueued changes are of metadata only.
	kinds  *changeKinds
	guards *hold.Guards
	// changedBy, when set, is told who made each change.
	changedBy *attribution.ChangedBy
	// policies may hold the changes of an object longer (coalesce).
	policies *Policies
}

func (h *configHandler) funcs() handler.TypedEventHandler[client.Object, Request] {
	return handler.TypedFuncs[client.Object, Request]{
		CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[client.Object], q queue) {
			if !h.own(e.Object) {
				h.create(ctx, e, q)
			}
		},
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[client.Object], q queue) {
			if !h.own(e.ObjectNew) {
				h.update(ctx, e, q)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[client.Object], q queue) {
			if !h.own(e.Object) {
				h.delete(ctx, e, q)
			}
		},
	}
}

// own tells whether obj is one of watcher's own objects (Config.Own),
// whose writes are no change of configuration.
func (h *configHandler) own(obj client.Object) bool {
	return slices.Contains(h.cfg.Own, h.request(obj).Ref)
}

// create enqueues the creation of an object, so that its users record it
// (or, with RestartOnCreate, restart). The objects listed at start-up are
// skipped: every workload is reconciled at start-up anyway.
func (h *configHandler) create(_ context.Context, e event.TypedCreateEvent[client.Object], q queue) {
	if e.IsInInitialList {
		return
	}
	h.record(nil, e.Object)
	h.kinds.data(h.request(e.Object))
	h.debounce.AddHeld(h.request(e.Object), q, h.policies.coalesce(h.kind, e.Object))
}

// update enqueues a data change, once the object's changes are quiet.
func (h *configHandler) update(_ context.Context, e event.TypedUpdateEvent[client.Object], q queue) {
	old, errOld := hash.FromObject(e.ObjectOld)
	cur, errNew := hash.FromObject(e.ObjectNew)
	if err := errors.Join(errOld, errNew); err != nil {
		h.log.Error(err, "Cached object has no digest", "object", h.request(e.ObjectNew).String())
		metrics.Errors.WithLabelValues("digest").Inc()
		return
	}
	h.guards.ConfigChanged(h.log, string(h.kind), e.ObjectOld, e.ObjectNew, old.Sum != cur.Sum)
	if old.Sum == cur.Sum {
		metrics.Skipped.WithLabelValues(plan.SkipMetadataOnly).Inc()
		h.log.V(1).Info("Metadata changed, data did not", "object", h.request(e.ObjectNew).String(), "reason", plan.SkipMetadataOnly)
		if readChanged(e.ObjectOld, e.ObjectNew) {
			// Labels or the annotations watcher reads changed: the object
			// may now be matched by a selector, or count by search/match,
			// for some workloads, or no longer. Its users record it as it
			// is now (no restart: no key changed), so that its next data
			// change is not taken for a new reference.
			h.kinds.metadata(h.request(e.ObjectNew))
			h.debounce.Add(h.request(e.ObjectNew), q)
		}
		return
	}
	h.kinds.data(h.request(e.ObjectNew))
	h.record(e.ObjectOld, e.ObjectNew)
	h.debounce.AddHeld(h.request(e.ObjectNew), q, h.policies.coalesce(h.kind, e.ObjectNew))
}

// record tells changedBy who made the change from old (nil: none) to cur.
func (h *configHandler) record(old, cur client.Object) {
	if h.changedBy != nil {
		h.changedBy.Add(h.request(cur).Ref, old, cur)
	}
}

// delete restarts nothing unless ReloadOnDelete: running pods keep the
// content they have, and new pods may fail to start without the object.
// Workloads keep their record, so recreating the object with the same
// content restarts nothing either. With ReloadOnDelete the users are
// reconciled, and plan.Decide restarts those that can start without it.
func (h *configHandler) delete(_ context.Context, e event.TypedDeleteEvent[client.Object], q queue) {
	if h.cfg.ReloadOnDelete {
		h.kinds.data(h.request(e.Object))
		h.debounce.Add(h.request(e.Object), q)
		return
	}
	metrics.Skipped.WithLabelValues(plan.SkipConfigDeleted).Inc()
	h.log.V(1).Info("Deleted; workloads using it keep running", "object", h.request(e.Object).String(), "reason", plan.SkipConfigDeleted)
}

func (h *configHandler) request(obj client.Object) Change {
	return Change{object.Ref{Kind: string(h.kind), Namespace: obj.GetNamespace(), Name: obj.GetName()}}
}

// readChanged tells whether what watcher reads of a ConfigMap or Secret
// besides its data changed: its labels (kept as an annotation in the
// store) or the annotations the store keeps. Who wrote the data last
// (attribution.Annotation) is not read by any rule.
func readChanged(old, cur client.Object) bool {
	return !maps.Equal(old.GetLabels(), cur.GetLabels()) ||
		!maps.Equal(without(old.GetAnnotations(), attribution.Annotation), without(cur.GetAnnotations(), attribution.Annotation))
}

// without returns m less key (m itself when it has no such key).
func without(m map[string]string, key string) map[string]string {
	if _, ok := m[key]; !ok {
		return m
	}
	out := maps.Clone(m)
	delete(out, key)
	return out
}

// changeKinds remembers which objects were enqueued for a change of their
// labels or annotations only, so that their processing is not counted or
// logged as a data change. A data change wins over a metadata change of
// the same object still in the queue. Entries leave when the object is
// processed, so the map holds at most the queue's objects.
type changeKinds struct {
	mu   sync.Mutex
	meta map[Change]bool
}

func newChangeKinds() *changeKinds { return &changeKinds{meta: map[Change]bool{}} }

// metadata notes a metadata-only change of req, unless a data change of
// it waits.
func (c *changeKinds) metadata(req Change) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, pending := c.meta[req]; !pending {
		c.meta[req] = true
	}
}

// data notes a data change of req.
func (c *changeKinds) data(req Change) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.meta[req] = false
}

// take tells whether the change of req being processed is of metadata
// only, and forgets it.
func (c *changeKinds) take(req Change) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	meta := c.meta[req]
	delete(c.meta, req)
	return meta
}
