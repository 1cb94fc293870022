package controller

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/selection"
	"github.com/watcher-dev/watcher/internal/store"
	"github.com/watcher-dev/watcher/internal/workload"
)

// The namespace selector (--namespace-selector): what is done, and when,
// is told in package selection.

// Values of the change label of metrics.NamespaceSelections.
const (
	namespaceSelected = "selected"
	namespaceDropped  = "dropped"
)

// namespaceWait is how long a request of a namespace that came to match
// waits for the namespace's event to be handled.
const namespaceWait = 100 * time.Millisecond

// inScope tells whether the objects of namespace are handled; wait: not
// yet known, look again after namespaceWait.
func (r *Reconciler) inScope(namespace string) (ok, wait bool) {
	if !r.Store.Selected(namespace) {
		return false, false
	}
	if !r.selection.IsTold(namespace) {
		return false, true
	}
	return true, false
}

// namespaceHandler tells the selection of the events of the informer of
// selected namespaces: a namespace added after the informer's initial list
// came to match, and its workloads are to be adopted.
type namespaceHandler struct {
	store     *store.Store
	selection *selection.Namespaces
	log       logr.Logger
}

func (h namespaceHandler) funcs() handler.TypedEventHandler[client.Object, Request] {
	return handler.TypedFuncs[client.Object, Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q queue) {
			if e.IsInInitialList {
				h.selection.Selected(e.Object.GetName(), "", nil)
				return
			}
			h.gained(e.Object.GetName(), e.Object.GetResourceVersion(), q)
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[client.Object], _ queue) {
			h.selection.Dropped(e.Object.GetName())
			metrics.NamespaceSelections.WithLabelValues(namespaceDropped).Inc()
			h.log.Info("Namespace no longer selected; its changes restart nothing", "namespace", e.Object.GetName())
		},
	}
}

// gained marks every workload of namespace, found through the store's
// namespace index, for adoption of what was written before the namespace's
// version since, and enqueues it.
func (h namespaceHandler) gained(namespace, since string, q queue) {
	var keys []workload.Key
	for _, k := range workload.Kinds {
		objs, err := h.store.Workloads(k.Name(), namespace)
		if err != nil {
			h.log.Error(err, "Cannot list the workloads of a selected namespace", "namespace", namespace, "kind", k.Name())
			metrics.Errors.WithLabelValues("index").Inc()
			continue
		}
		for _, o := range objs {
			keys = append(keys, object.Ref{Kind: k.Name(), Namespace: namespace, Name: o.GetName()})
		}
	}
	h.selection.Selected(namespace, since, keys)
	for _, k := range keys {
		q.Add(Workload{k})
	}
	metrics.NamespaceSelections.WithLabelValues(namespaceSelected).Inc()
	h.log.Info("Namespace selected; adopting its workloads, changes made before restart nothing", "namespace", namespace, "workloads", len(keys), "resourceVersion", since)
}
