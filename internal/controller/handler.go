package controller

import (
	"context"
	"errors"
	"strings"

	"github.com/go-logr/logr"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/workload"
)

type queue = workqueue.TypedRateLimitingInterface[workload.Key]

// configHandler maps ConfigMap or Secret events to the workloads that use the
// object. It is where a change is detected (old and new digests differ) and
// logged; the decision to restart stays with the reconciler.
type configHandler struct {
	kind   refs.Kind
	reader client.Reader
	cfg    Config
	log    logr.Logger
}

func (h *configHandler) funcs() handler.TypedEventHandler[client.Object, workload.Key] {
	return handler.TypedFuncs[client.Object, workload.Key]{
		CreateFunc: h.create,
		UpdateFunc: h.update,
		DeleteFunc: h.delete,
	}
}

// create enqueues the users of a new object (and of every object at
// start-up): they may need adopting, or, with RestartOnCreate, restarting.
func (h *configHandler) create(ctx context.Context, e event.TypedCreateEvent[client.Object], q queue) {
	h.eachUser(ctx, e.Object, func(key workload.Key, _ client.Object) { q.Add(key) })
}

// update detects a data change and enqueues the workloads it may restart,
// after the coalescing delay.
func (h *configHandler) update(ctx context.Context, e event.TypedUpdateEvent[client.Object], q queue) {
	obj := e.ObjectNew
	id := h.id(obj)
	old, errOld := hash.FromObject(e.ObjectOld)
	cur, errNew := hash.FromObject(obj)
	if err := errors.Join(errOld, errNew); err != nil {
		h.log.Error(err, "Cached object has no digest", "object", id)
		metrics.Errors.WithLabelValues("digest").Inc()
		return
	}
	if old.Sum == cur.Sum {
		metrics.Skipped.WithLabelValues(plan.SkipMetadataOnly).Inc()
		h.log.V(1).Info("Metadata changed, data did not", "object", id, "reason", plan.SkipMetadataOnly)
		return
	}
	changed := hash.ChangedKeys(old.Keys, cur.Keys)
	metrics.ConfigChanges.WithLabelValues(string(h.kind)).Inc()
	h.log.Info(id+" changed, keys: "+strings.Join(changed, ","), "object", id, "keys", changed)

	optedOut, err := plan.OptedOut(obj.GetAnnotations(), h.cfg.Annotation)
	if err != nil {
		h.log.Error(err, "Invalid annotation", "object", id)
	}
	if optedOut {
		// The users still get their record refreshed, without a restart,
		// so that the change never counts later.
		metrics.Skipped.WithLabelValues(plan.SkipConfigOptedOut).Inc()
		h.log.Info("Change restarts nothing: the object opted out", "object", id, "reason", plan.SkipConfigOptedOut)
	}
	ref := refs.Ref{Kind: h.kind, Name: obj.GetName()}
	h.eachUser(ctx, obj, func(key workload.Key, w client.Object) {
		if reason := h.triage(w, ref.ID(), changed); reason != "" {
			metrics.Skipped.WithLabelValues(reason).Inc()
			h.log.V(1).Info("Change restarts nothing for this workload", "object", id, "workload", key.String(), "reason", reason)
			return
		}
		if optedOut {
			q.Add(key)
			return
		}
		q.AddAfter(key, h.cfg.Coalesce)
	})
}

// delete restarts nothing: running pods keep the content they have, and new
// pods would fail to start without the object. Workloads keep their record,
// so recreating the object with the same content restarts nothing either.
func (h *configHandler) delete(_ context.Context, e event.TypedDeleteEvent[client.Object], _ queue) {
	metrics.Skipped.WithLabelValues(plan.SkipConfigDeleted).Inc()
	h.log.V(1).Info("Deleted; workloads using it keep running", "object", h.id(e.Object), "reason", plan.SkipConfigDeleted)
}

func (h *configHandler) triage(w client.Object, id string, changed []string) string {
	tmpl, err := workload.PodTemplate(w)
	if err != nil {
		return ""
	}
	optedOut, _ := plan.OptedOut(w.GetAnnotations(), h.cfg.Annotation) // reported by the reconciler
	return plan.Triage(optedOut, refs.FromPodSpec(&tmpl.Spec), id, changed)
}

// eachUser calls fn for every cached workload whose pod template uses obj,
// found through the field index. The objects are the cache's own: read only.
func (h *configHandler) eachUser(ctx context.Context, obj client.Object, fn func(workload.Key, client.Object)) {
	value := obj.GetNamespace() + "/" + obj.GetName()
	for _, kind := range workload.Kinds {
		list := kind.NewList()
		err := h.reader.List(ctx, list, client.MatchingFields{indexFor(h.kind): value}, client.UnsafeDisableDeepCopy)
		if err != nil {
			h.log.Error(err, "Cannot look up workloads in the cache", "object", h.id(obj), "workloadKind", kind.Name)
			metrics.Errors.WithLabelValues("index").Inc()
			continue
		}
		_ = apimeta.EachListItem(list, func(o runtime.Object) error {
			w := o.(client.Object)
			fn(workload.KeyOf(kind.Name, w), w)
			return nil
		})
	}
}

// id names obj as "Kind namespace/name".
func (h *configHandler) id(obj client.Object) string {
	return string(h.kind) + " " + obj.GetNamespace() + "/" + obj.GetName()
}
