package controller

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/announce"
	"github.com/watcher-dev/watcher/internal/cause"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/workload"
)

// announcer says r's restarts (package announce), from its store, its
// Recorder and its alerts as they are now.
func (r *Reconciler) announcer() announce.Announcer {
	return announce.Announcer{Store: r.Store, ChangedBy: r.changedBy, Recorder: r.Recorder, Alerts: r.Config.Alerts}
}

// cause is announce.Announcer.Cause.
func (r *Reconciler) cause(key workload.Key, changes []plan.Change) cause.Restart {
	return r.announcer().Cause(key, changes)
}

// announce is announce.Announcer.Announce. Restarts are counted there
// (metrics.Restart) and, when their patch fails, in apply.
func (r *Reconciler) announce(ctx context.Context, obj client.Object, said cause.Restart, restartedFor, strategy string) {
	r.announcer().Announce(ctx, obj, said, restartedFor, strategy)
}
