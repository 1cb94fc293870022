package controller

import (
	"context"

	"github.com/go-logr/logr"

	"github.com/watcher-dev/watcher/internal/alert"
	"github.com/watcher-dev/watcher/internal/lock"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/sealed"
	"github.com/watcher-dev/watcher/internal/workload"
)

// sealedOwner returns the SealedSecret the Secret ref of namespace was
// made from, as the store keeps its owner (see sealed.OwnerReferences), or
// "" for a ConfigMap or a Secret not made from one.
func (r *Reconciler) sealedOwner(namespace string, ref refs.Ref) string {
	if ref.Kind != refs.Secret {
		return ""
	}
	obj, err := r.Store.Get(string(ref.Kind), namespace, ref.Name)
	if err != nil || obj == nil {
		return ""
	}
	return sealed.Owner(obj)
}

// fromSealed says where a Secret came from: " (from SealedSecret
// namespace/name)", without the namespace if it is empty; "" for no
// SealedSecret.
func fromSealed(namespace, name string) string {
	if name == "" {
		return ""
	}
	if namespace != "" {
		name = namespace + "/" + name
	}
	return " (from SealedSecret " + name + ")"
}

// notifyRestart sends the restart alert of key for changes, each made
// from the SealedSecret in owners and by the managers in by.
func (r *Reconciler) notifyRestart(key workload.Key, changes []plan.Change, owners []string, by [][]string) {
	if r.Config.Alerts == nil {
		return
	}
	a := alert.Alert{Event: alert.Restart, Workload: &alert.Object{Kind: key.Kind, Namespace: key.Namespace, Name: key.Name}}
	for i, c := range changes {
		a.Sources = append(a.Sources, alert.Source{
			Object: alert.Object{Kind: string(c.Ref.Kind), Namespace: key.Namespace, Name: c.Ref.Name},
			Keys:   c.Keys, SealedSecret: owners[i], ChangedBy: by[i],
		})
	}
	r.Config.Alerts.Notify(a)
}

// claimer returns the function that tells whether this replica reports a
// change outside the work queue (a SealedSecret's): only a replica that
// processes changes (leading: the leader in the lease mode), and, where
// several do (the redis mode), the one that takes the change's lock. A
// lock backend that fails does not lose the report: it may be made twice.
func claimer(leading func() bool, locker lock.Locker, log logr.Logger) func(context.Context, string) bool {
	return func(ctx context.Context, id string) bool {
		if !leading() {
			return false
		}
		held, outcome, err := locker.Acquire(ctx, id)
		switch {
		case err != nil:
			metrics.Errors.WithLabelValues("lock").Inc()
			log.Error(err, "Cannot take the lock of the change; reporting it anyway", "change", id)
			return true
		case outcome != lock.Acquired:
			return false
		}
		if err := held.Release(context.WithoutCancel(ctx), true); err != nil {
			metrics.Errors.WithLabelValues("lock").Inc()
			log.Error(err, "Cannot release the lock of the change", "change", id)
		}
		return true
	}
}
