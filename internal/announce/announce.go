// Package announce says a restart, made or would-be (dry-run), once: the
// cause built from what the store knows of each changed object (the
// SealedSecret it was made from, who changed it), then the log line, the
// Event on the workload, the metric and the alert.
//
//	the restart                     said as
//	made                            log line, Event (action Restart),
//	                                metrics.Restart (Restarted), an alert
//	made, pods roll only when       log line, Event (action Restart),
//	  deleted (OnDelete)            watcher_skipped_changes_total{on-delete},
//	                                metrics.Restart (PatchedOnDelete); no alert
//	would-be (dry-run)              log line, Event (action DryRun),
//	                                watcher_would_restart_total, an alert
//	would-be, OnDelete              log line, Event (action DryRun),
//	                                watcher_skipped_changes_total{on-delete};
//	                                no alert
//
// Restarts whose patch fails are counted by the controller, not here.
package announce

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/watcher-dev/watcher/internal/alert"
	"github.com/watcher-dev/watcher/internal/attribution"
	"github.com/watcher-dev/watcher/internal/cause"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/sealed"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Reader reads the ConfigMaps and Secrets as the store keeps them
// (store.Store.Get): nil and no error when there is none.
type Reader interface {
	Get(kind, namespace, name string) (*metav1.PartialObjectMetadata, error)
}

// Announcer says restarts. Its zero Alerts sends no alert.
type Announcer struct {
	// Store is read for the owner and the writers of a changed object.
	Store Reader
	// ChangedBy says who made the changes not handled yet.
	ChangedBy *attribution.ChangedBy
	// Recorder emits the Events on the workloads.
	Recorder recorder.EventRecorder
	// Alerts, when set, is told of every restart.
	Alerts alert.Notifier
}

// sealedOwner returns the SealedSecret the Secret ref of namespace was
// made from, as the store keeps its owner (see sealed.OwnerReferences), or
// "" for a ConfigMap or a Secret not made from one.
func (a Announcer) sealedOwner(namespace string, ref refs.Ref) string {
	if ref.Kind != refs.Secret {
		return ""
	}
	obj, err := a.Store.Get(string(ref.Kind), namespace, ref.Name)
	if err != nil || obj == nil {
		return ""
	}
	return sealed.Owner(obj)
}

// Writers returns who changed the object ref of namespace: those recorded
// since its change was last handled or, if none were (a change made while
// watcher was down, found at start-up), the last writers of its content.
func (a Announcer) Writers(namespace string, ref refs.Ref) []string {
	if m := a.ChangedBy.Managers(ref.Object(namespace)); m != nil {
		return m
	}
	obj, err := a.Store.Get(string(ref.Kind), namespace, ref.Name)
	if err != nil || obj == nil {
		return nil
	}
	ws := attribution.Of(obj)
	return attribution.Changed(ws, ws) // none moved: the newest writers
}

// Cause says the restart of key for changes: each with the SealedSecret
// it was made from and who changed it, as the store knows them.
func (a Announcer) Cause(key workload.Key, changes []plan.Change) cause.Restart {
	said := cause.Restart{Workload: key}
	for _, c := range changes {
		said.Changes = append(said.Changes, cause.Change{
			Source: c.Ref.Object(key.Namespace), Keys: c.Keys, Old: c.Old, New: c.New,
			SealedSecret: a.sealedOwner(key.Namespace, c.Ref), ChangedBy: a.Writers(key.Namespace, c.Ref),
		})
	}
	return said
}

// Announce says a restart (made, or would-be in dry-run) once, from said
// alone: the log line, the Event on obj, the metric and, for a restart
// made, the alert (see the table in the package comment). restartedFor is
// the restart's id; strategy, the strategy that wrote a restart made.
func (a Announcer) Announce(ctx context.Context, obj client.Object, said cause.Restart, restartedFor, strategy string) {
	kv := append(said.KeysAndValues(), "restartedFor", restartedFor)
	if !said.DryRun {
		kv = append(kv, "strategy", strategy)
	}
	ctrl.LoggerFrom(ctx).Info(said.Message(), kv...)
	action := "Restart"
	if said.DryRun {
		action = "DryRun"
	}
	a.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, said.Reason(), action, "%s", said.Note())
	switch {
	case said.OnDelete != "":
		metrics.Skipped.WithLabelValues(plan.SkipOnDelete).Inc()
		if !said.DryRun {
			metrics.Restart(said.Workload.Kind, said.Workload.Namespace, metrics.PatchedOnDelete)
		}
	case said.DryRun:
		metrics.WouldRestart.WithLabelValues(said.Workload.Kind).Inc()
		if a.Alerts != nil {
			a.Alerts.Notify(alert.FromRestart(said))
		}
	default:
		metrics.Restart(said.Workload.Kind, said.Workload.Namespace, metrics.Restarted)
		if a.Alerts != nil {
			a.Alerts.Notify(alert.FromRestart(said))
		}
	}
}
