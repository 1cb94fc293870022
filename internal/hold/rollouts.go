package hold

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/watcher-dev/watcher/internal/attribution"
	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/note"
	"github.com/watcher-dev/watcher/internal/object"
)

// Observe updates what the guards know of key from its cached state, at
// every reconcile of the workload: whether a rollout watcher started is in
// progress (so that rollouts in progress are rebuilt from the cluster after
// a restart of watcher or a lease handover), done, or gone; and whether a
// person released the holds of a failed rollout on it. The caller says
// whether the workload is restarted by eviction (evicts): its rollout
// shows only in its pods, and the caller tells it (Evicting).
func (g *Guards) Observe(ctx context.Context, key object.Ref, cached *metav1.PartialObjectMetadata, evicts bool) {
	if g == nil {
		return
	}
	if cached == nil {
		g.rollouts.Gone(key)
		g.mu.Lock()
		delete(g.release, key)
		g.mu.Unlock()
		g.unhold(ctx, key, "workload deleted")
		g.wakeNext(ctx)
		return
	}
	a := cached.GetAnnotations()
	if v, ok := a[guard.ReleaseAnnotation]; ok {
		g.mu.Lock()
		last, seen := g.release[key]
		g.release[key] = v
		g.mu.Unlock()
		if seen && last != v && g.rollouts.Release(key) {
			ctrl.LoggerFrom(ctx).Info("Failed rollout released by annotation", "annotation", guard.ReleaseAnnotation)
			g.wakeReleased(ctx, cached)
		}
	}
	if evicts {
		// Its rollout shows only in its pods: the controller tells it
		// (Evicting).
		g.wakeNext(ctx)
		return
	}
	_, rolling := a[guard.RollingAnnotation]
	o := guard.Observation{Rolling: rolling, Generation: cached.Generation, Now: g.now()}
	if st, ok := g.state(cached); ok {
		o.State = &st
	}
	f, ok := g.rollouts.Seen(key, o)
	if !ok {
		return
	}
	g.finished(ctx, cached, f)
	g.wakeNext(ctx)
}

// Evicting tells the guards whether the restart by eviction of key (obj,
// a workload restarted by the evict strategy) is still rolling: pods
// created before its restart remain. Its rollout is then timed, waved and
// failed like any other (guard.Rollouts.SeenEvicting).
func (g *Guards) Evicting(ctx context.Context, key object.Ref, obj client.Object, rolling bool) {
	if g == nil {
		return
	}
	st, ok := g.state(obj)
	if !ok {
		return
	}
	if f, ok := g.rollouts.SeenEvicting(key, st, rolling, g.now()); ok {
		g.finished(ctx, obj, f)
	}
	g.wakeNext(ctx)
}

// wakeReleased decides again the restarts held by the failed rollout of
// obj, released: those for a change of one of the sources its restart
// state names (all held by a failed rollout, if it names none).
func (g *Guards) wakeReleased(ctx context.Context, obj client.Object) {
	st, ok := g.state(obj)
	if !ok || len(st.Sources) == 0 {
		g.wakeHeld(ctx, guard.ReasonFailedRollout)
		return
	}
	ids := make([]object.Ref, 0, len(st.Sources))
	for _, s := range st.Sources {
		ids = append(ids, s.Object)
	}
	g.wakeFor(ctx, ids, guard.ReasonFailedRollout)
}

// finished reports a rollout that finished.
func (g *Guards) finished(ctx context.Context, obj client.Object, f guard.Finished) {
	log := ctrl.LoggerFrom(ctx)
	switch {
	case f.Recovered && f.Quiet:
		g.wakeHeld(ctx, guard.ReasonFailedRollout)
	case f.Recovered:
		log.Info("Failed rollout finished after all; the restarts it held go on")
		g.recorder.Eventf(obj, nil, corev1.EventTypeNormal, ReasonRolloutResumed, "Rollout", "%s", "Rollout done after its timeout; the restarts it held go on")
		g.wakeHeld(ctx, guard.ReasonFailedRollout)
	case f.Duration > 0:
		metrics.RolloutDuration.WithLabelValues(f.Kind).Observe(f.Duration.Seconds())
		log.V(1).Info("Rollout done", "duration", f.Duration.Round(time.Millisecond).String())
	}
}

// wakeNext decides again the waiters of the wave that may start now.
func (g *Guards) wakeNext(ctx context.Context) {
	for _, k := range g.rollouts.Next(g.now()) {
		g.wakeNow(ctx, k)
	}
}

// ConfigChanged is told of every update of a cached ConfigMap or Secret,
// on every replica: it tells the flap detector when its data was written,
// and by whom (counted as a change only once handled: Handled); forgets
// the failed rollouts of a content that is no longer current; and releases
// the holds of failed rollouts when a person sets guard.ReleaseAnnotation
// on the object.
func (g *Guards) ConfigChanged(log logr.Logger, kind string, old, cur client.Object, dataChanged bool) {
	if g == nil {
		return
	}
	id := object.Ref{Kind: kind, Namespace: cur.GetNamespace(), Name: cur.GetName()}
	if was, now := old.GetAnnotations()[guard.ReleaseAnnotation], cur.GetAnnotations()[guard.ReleaseAnnotation]; was != now && now != "" {
		n := g.rollouts.ReleaseSource(id)
		log.Info("Held restarts released by annotation", "object", id, "annotation", guard.ReleaseAnnotation, "failedRollouts", n)
		// Only the holds of a change of this object can be released by it.
		g.wakeFor(g.base(), []object.Ref{id}, guard.ReasonFailedRollout, guard.ReasonFlapping, guard.ReasonBudget)
	}
	if !dataChanged {
		return
	}
	g.flaps.Touch(id, g.now(), attribution.Changed(attribution.Of(old), attribution.Of(cur)))
	// A failed rollout holds the restarts of its content; with a new
	// content (a fix, or the bad change reverted) that hold is a phantom.
	if n := g.rollouts.ReleaseSource(id); n > 0 {
		log.Info("Changed again: the failed rollouts of its previous content hold nothing any more", "object", id.String(), "failedRollouts", n)
		g.wakeFor(g.base(), []object.Ref{id}, guard.ReasonFailedRollout)
	}
}

// Handled counts a change of the source id (the object cur), handled
// after the controller's debounce by the replica that processes changes,
// for a source that workloads use: the flap detector counts these, so a
// burst of writes coalesced into one change is one change, and an object
// nobody uses never flaps. Only this replica says that it flaps.
func (g *Guards) Handled(ctx context.Context, id object.Ref, cur client.Object) {
	if g == nil {
		return
	}
	started, msg := g.flaps.Observe(id, g.now())
	if !started {
		return
	}
	metrics.FlappingSources.Inc()
	ctrl.LoggerFrom(ctx).Info("Flapping: restarts caused by it are held", "object", id.String(), "writers", g.flaps.Writers(id, g.now()), "why", msg)
	g.recorder.Eventf(cur, nil, corev1.EventTypeWarning, ReasonFlapping, "Restart", "%s", note.Truncate(msg))
	g.notifier.Notify(guard.Event{Type: guard.EventFlapping, Source: id, Reason: guard.ReasonFlapping, Message: msg, Time: g.now()})
}

// GoneKind forgets every workload of kind: its API is no longer served.
func (g *Guards) GoneKind(kind string) {
	if g == nil {
		return
	}
	g.rollouts.GoneKind(kind)
	g.forgetKind(kind)
}

// base is the context of the sweeper, once it runs.
func (g *Guards) base() context.Context {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ctx == nil {
		return context.Background()
	}
	return g.ctx
}

// sweepEvery is how often the guards look at the time: rollouts past their
// timeout, flapping sources quiet again, gauges.
const sweepEvery = time.Second

// Sweeper returns the runnable of the guards' clock, to add to the
// manager: it runs on every replica.
func (g *Guards) Sweeper(log logr.Logger) manager.Runnable { return sweeper{g: g, log: log} }

// sweeper runs the guards' clock on every replica.
type sweeper struct {
	g   *Guards
	log logr.Logger
}

// NeedLeaderElection is false: flapping is watched on standbys too, so a
// new leader knows it.
func (s sweeper) NeedLeaderElection() bool { return false }

// Start sweeps every sweepEvery until ctx is done.
func (s sweeper) Start(ctx context.Context) error {
	s.g.mu.Lock()
	s.g.ctx = ctx
	s.g.mu.Unlock()
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			s.g.sweep(ctrl.LoggerInto(ctx, s.log))
		}
	}
}

func (g *Guards) sweep(ctx context.Context) {
	now := g.now()
	log := ctrl.LoggerFrom(ctx)
	stopped, flapping := g.flaps.Sweep(now)
	for _, id := range stopped {
		log.Info("Quiet again: no longer flapping", "object", id)
	}
	metrics.FlappingSources.Set(float64(flapping))
	g.budget.Sweep(now)
	failures, starved := g.rollouts.Sweep(now)
	for _, f := range failures {
		g.failed(ctx, f)
	}
	for _, k := range starved {
		g.starved(ctx, k)
	}
	running, _ := g.rollouts.InProgress()
	metrics.RolloutsInProgress.Set(float64(running))
	g.wakeNext(ctx)
}

// starved says that the restart of key waits long for a wave slot.
func (g *Guards) starved(ctx context.Context, key object.Ref) {
	msg := "Restart waiting for a rollout slot for longer than " + g.cfg.RolloutTimeout.String() + "; see watcher_wave_wait_seconds and --max-concurrent-rollouts"
	ctrl.LoggerFrom(ctx).Info("Restart waits long for a wave slot", "workload", key.String())
	if obj, err := g.store.Get(key.Kind, key.Namespace, key.Name); err == nil && obj != nil {
		g.recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonWaitingLong, "Restart", "%s", note.Truncate(msg))
	}
}

// failed reports a rollout past its timeout.
func (g *Guards) failed(ctx context.Context, f guard.Failure) {
	key := f.Key
	if !f.Here && g.cfg.Shared {
		return // another replica started it, and reports it
	}
	metrics.FailedRollouts.WithLabelValues(f.Key.Kind).Inc()
	msg := "Rollout not done after " + g.cfg.RolloutTimeout.String()
	if g.cfg.HoldOnFailure {
		msg += "; the other restarts caused by the same change are held until it is done, or until " + guard.ReleaseAnnotation + " is set to a new value on it or on the ConfigMap/Secret"
	}
	ctrl.LoggerFrom(ctx).Info("Rollout failed", "workload", f.Key.String(), "timeout", g.cfg.RolloutTimeout.String(), "holdOthers", g.cfg.HoldOnFailure)
	if obj, err := g.store.Get(key.Kind, key.Namespace, key.Name); err == nil && obj != nil {
		g.recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonRolloutFailed, "Rollout", "%s", note.Truncate(msg))
	}
	g.notifier.Notify(guard.Event{Type: guard.EventRolloutFailed, Workload: key, Reason: guard.ReasonFailedRollout, Message: msg, Time: g.now()})
}
