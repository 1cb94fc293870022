package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/alert"
	"github.com/watcher-dev/watcher/internal/attribution"
	"github.com/watcher-dev/watcher/internal/cause"
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

// writers returns who changed the object ref of namespace: those recorded
// since its change was last handled or, if none were (a change made while
// watcher was down, found at start-up), the last writers of its content.
func (r *Reconciler) writers(namespace string, ref refs.Ref) []string {
	if m := r.changedBy.Managers(ref.Object(namespace)); m != nil {
		return m
	}
	obj, err := r.Store.Get(string(ref.Kind), namespace, ref.Name)
	if err != nil || obj == nil {
		return nil
	}
	ws := attribution.Of(obj)
	return attribution.Changed(ws, ws) // none moved: the newest writers
}

// cause says the restart of key for changes: each with the SealedSecret
// it was made from and who changed it, as the store knows them.
func (r *Reconciler) cause(key workload.Key, changes []plan.Change) cause.Restart {
	said := cause.Restart{Workload: key}
	for _, c := range changes {
		said.Changes = append(said.Changes, cause.Change{
			Source: c.Ref.Object(key.Namespace), Keys: c.Keys, Old: c.Old, New: c.New,
			SealedSecret: r.sealedOwner(key.Namespace, c.Ref), ChangedBy: r.writers(key.Namespace, c.Ref),
		})
	}
	return said
}

// announce says a restart (made, or would-be in dry-run) once, from said
// alone: the log line, the Event on obj, the metric and, for a restart
// made, the alert. Restarts are counted here (metrics.Restart) and, when
// their patch fails, in apply.
func (r *Reconciler) announce(ctx context.Context, obj client.Object, said cause.Restart, restartedFor, strategy string) {
	kv := append(said.KeysAndValues(), "restartedFor", restartedFor)
	if !said.DryRun {
		kv = append(kv, "strategy", strategy)
	}
	ctrl.LoggerFrom(ctx).Info(said.Message(), kv...)
	action := "Restart"
	if said.DryRun {
		action = "DryRun"
	}
	r.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, said.Reason(), action, "%s", said.Note())
	switch {
	case said.OnDelete != "":
		metrics.Skipped.WithLabelValues(plan.SkipOnDelete).Inc()
		if !said.DryRun {
			metrics.Restart(said.Workload.Kind, said.Workload.Namespace, metrics.PatchedOnDelete)
		}
	case said.DryRun:
		metrics.WouldRestart.WithLabelValues(said.Workload.Kind).Inc()
		if r.Config.Alerts != nil {
			r.Config.Alerts.Notify(alert.FromRestart(said))
		}
	default:
		metrics.Restart(said.Workload.Kind, said.Workload.Namespace, metrics.Restarted)
		if r.Config.Alerts != nil {
			r.Config.Alerts.Notify(alert.FromRestart(said))
		}
	}
}
