package controller

import (
	"context"
	"sync"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/store"
	"github.com/watcher-dev/watcher/internal/workload"
)

// The namespace selector (--namespace-selector). The informers of
// ConfigMaps, Secrets and workloads watch every namespace as without it;
// the store's informer of the selected namespaces (store.Selected) says
// which of them are handled, when a request is processed:
//
//	event                                what is done
//	a change in a namespace not          nothing: no lock taken, no
//	  selected                           workload reconciled
//	a workload of a namespace not        nothing: never adopted, recorded
//	  selected                           or restarted
//	a namespace comes to match, while    each of its workloads is enqueued
//	  watcher runs                       for adoption: its record is
//	                                     written as the configuration is
//	                                     now, and a change made while the
//	                                     namespace was not selected
//	                                     restarts nothing (Refresh, not
//	                                     Restart)
//	a namespace no longer matches        its pending adoptions are
//	                                     forgotten; its later changes
//	                                     restart nothing
//	watcher starts                       the namespaces matching then are
//	                                     selected (no adoption): changes
//	                                     made while it was down restart
//	                                     their workloads as everywhere
//
// The filter is applied when a request is processed, not when an event
// is enqueued: the namespace informer and the others deliver their events
// in no set order, and the workers start only once it has synced. An
// adoption is done by the first reconcile of the workload after the
// namespace came to match, whatever enqueued it: a change of one of its
// ConfigMaps made in the instant between the labelling and that
// reconcile is recorded without a restart too.

// Values of the change label of metrics.NamespaceSelections.
const (
	namespaceSelected = "selected"
	namespaceDropped  = "dropped"
)

// adoptions are the workloads of newly selected namespaces not reconciled
// since; safe for concurrent use, and nil-safe (no selector: none).
type adoptions struct {
	mu   sync.Mutex
	keys map[workload.Key]bool
}

func newAdoptions() *adoptions { return &adoptions{keys: map[workload.Key]bool{}} }

func (a *adoptions) add(key workload.Key) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.keys[key] = true
}

// take tells whether key is to be adopted, and forgets it.
func (a *adoptions) take(key workload.Key) bool {
	if a == nil {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	ok := a.keys[key]
	delete(a.keys, key)
	return ok
}

// drop forgets the adoptions of namespace.
func (a *adoptions) drop(namespace string) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for k := range a.keys {
		if k.Namespace == namespace {
			delete(a.keys, k)
		}
	}
}

// adopted is p for a workload adopted with its namespace: its record is
// brought to the configuration as it is now, and nothing restarts.
func adopted(p plan.Plan) plan.Plan {
	if p.Action == plan.Restart {
		p.Action, p.Changes = plan.Refresh, nil
	}
	return p
}

// namespaceHandler turns the events of the informer of selected
// namespaces into adoptions: a namespace added after the informer's
// initial list came to match.
type namespaceHandler struct {
	store     *store.Store
	adoptions *adoptions
	log       logr.Logger
}

func (h namespaceHandler) funcs() handler.TypedEventHandler[client.Object, Request] {
	return handler.TypedFuncs[client.Object, Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q queue) {
			if !e.IsInInitialList {
				h.selected(e.Object.GetName(), q)
			}
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[client.Object], _ queue) {
			h.adoptions.drop(e.Object.GetName())
			metrics.NamespaceSelections.WithLabelValues(namespaceDropped).Inc()
			h.log.Info("Namespace no longer selected; its changes restart nothing", "namespace", e.Object.GetName())
		},
	}
}

// selected enqueues for adoption every workload of namespace, found
// through the store's namespace index.
func (h namespaceHandler) selected(namespace string, q queue) {
	n := 0
	for _, k := range workload.Kinds {
		objs, err := h.store.Workloads(k.Name(), namespace)
		if err != nil {
			h.log.Error(err, "Cannot list the workloads of a selected namespace", "namespace", namespace, "kind", k.Name())
			metrics.Errors.WithLabelValues("index").Inc()
			continue
		}
		for _, o := range objs {
			key := object.Ref{Kind: k.Name(), Namespace: namespace, Name: o.Name}
			h.adoptions.add(key)
			q.Add(Workload{key})
			n++
		}
	}
	metrics.NamespaceSelections.WithLabelValues(namespaceSelected).Inc()
	h.log.Info("Namespace selected; adopting its workloads, nothing restarted", "namespace", namespace, "workloads", n)
}
