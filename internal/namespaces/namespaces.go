// Package namespaces follows, at run time, the namespaces the namespace
// selector (--namespace-selector) selects: it tells package selection of
// the events of the store's informer of selected namespaces, and queues
// the workloads of a namespace that came to match for adoption. What is
// done, and when, is told in package selection.
//
//	event of the informer                what Handler does
//	created, in its initial list         selected, nothing adopted
//	created later (came to match)        selected at its resourceVersion;
//	                                     each of its workloads (the store's
//	                                     namespace index) marked for
//	                                     adoption and queued
//	deleted (no longer matches)          dropped
package namespaces

import (
	"context"

	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/selection"
	"github.com/watcher-dev/watcher/internal/store"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Values of the change label of metrics.NamespaceSelections.
const (
	namespaceSelected = "selected"
	namespaceDropped  = "dropped"
)

// Handler tells Selection of the events of the informer of selected
// namespaces (see the package comment); R is the controller's request.
type Handler[R comparable] struct {
	// Store's namespace index finds the workloads of a namespace.
	Store *store.Store
	// Selection is told of the namespaces selected and dropped.
	Selection *selection.Namespaces
	// Log logs the namespaces selected and dropped.
	Log logr.Logger
	// Workload is the request that reconciles the workload of ref.
	Workload func(ref object.Ref) R
}

// Funcs returns h as the informer's event handler.
func (h Handler[R]) Funcs() handler.TypedEventHandler[client.Object, R] {
	return handler.TypedFuncs[client.Object, R]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[R]) {
			if e.IsInInitialList {
				h.Selection.Selected(e.Object.GetName(), "", nil)
				return
			}
			h.gained(e.Object.GetName(), e.Object.GetResourceVersion(), q)
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[client.Object], _ workqueue.TypedRateLimitingInterface[R]) {
			h.Selection.Dropped(e.Object.GetName())
			metrics.NamespaceSelections.WithLabelValues(namespaceDropped).Inc()
			h.Log.Info("Namespace no longer selected; its changes restart nothing", "namespace", e.Object.GetName())
		},
	}
}

// gained marks every workload of namespace, found through the store's
// namespace index, for adoption of what was written before the namespace's
// version since, and enqueues it.
func (h Handler[R]) gained(namespace, since string, q workqueue.TypedRateLimitingInterface[R]) {
	var keys []workload.Key
	for _, k := range workload.Kinds {
		objs, err := h.Store.Workloads(k.Name(), namespace)
		if err != nil {
			h.Log.Error(err, "Cannot list the workloads of a selected namespace", "namespace", namespace, "kind", k.Name())
			metrics.Errors.WithLabelValues("index").Inc()
			continue
		}
		for _, o := range objs {
			keys = append(keys, object.Ref{Kind: k.Name(), Namespace: namespace, Name: o.GetName()})
		}
	}
	h.Selection.Selected(namespace, since, keys)
	for _, k := range keys {
		q.Add(h.Workload(k))
	}
	metrics.NamespaceSelections.WithLabelValues(namespaceSelected).Inc()
	h.Log.Info("Namespace selected; adopting its workloads, changes made before restart nothing", "namespace", namespace, "workloads", len(keys), "resourceVersion", since)
}
