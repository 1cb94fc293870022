package evict

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/note"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Warning Events of a workload restarted by the evict strategy.
const (
	// ReasonBlocked: a PodDisruptionBudget refuses its next eviction.
	ReasonBlocked = "EvictionBlocked"
	// ReasonForbidden: watcher may not list its pods or evict them
	// (RBAC); the Event names the right missing.
	ReasonForbidden = "EvictionForbidden"
)

// Rollouts are told of the progress of each restart by eviction (the
// guards: package hold), which shows only in the workload's pods.
type Rollouts interface {
	// Evicting says whether the restart of key (obj) is still rolling:
	// pods created before it remain.
	Evicting(ctx context.Context, key object.Ref, obj client.Object, rolling bool)
}

// Progress carries on, level-triggered, the restarts by eviction: at each
// Step, the pods of a workload created before its restart are evicted in
// the order and at the pace Next decides. Nothing waits: a step returns
// when to look again, and Tracker bounds the looks (a backoff from seconds
// to minutes, reset by an event of the workload; none past the rollout
// timeout until an event of the workload).
//
//	step                                          requests
//	restart done (memory or DoneAnnotation)       none
//	not due, or past its timeout (Tracker.Look)   none
//	look: read the workload, its ReplicaSets and  GET, LIST, LIST (namespace,
//	  its pods from the API server                selector), evictions
//	done: mark it on the workload, once           PATCH
type Progress struct {
	// Client evicts pods and marks restarts done.
	Client client.Client
	// Fresh reads the workload and its pods from the API server.
	Fresh client.Reader
	// Recorder emits the Warning Events (ReasonBlocked, ReasonForbidden).
	Recorder recorder.EventRecorder
	// Tracker remembers the looks.
	Tracker Tracker
	// Sign is the MAC of the installation's key; nil: no restart is
	// marked done on its workload.
	Sign Signer
	// StateKey is the annotation of the restart's state (for ServerTime).
	StateKey string
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// Rollouts are told of each look's result; nil: none.
	Rollouts Rollouts
}

// Step carries on the restart by eviction at (watcher's time of it) of
// key, a workload of kind that cached, its copy in watcher's store, says
// was restarted by eviction. It returns when to look again; 0: not before
// an event of the workload.
//
// The pods are old if created before the API server's time of the
// restart's write (ServerTime), watcher's own clock only for a restart
// written before that time was kept.
func (p *Progress) Step(ctx context.Context, key object.Ref, kind workload.Kind, cached client.Object, at time.Time) time.Duration {
	if IsDone(cached.GetAnnotations(), at, string(cached.GetUID()), p.Sign) {
		p.Tracker.Done(key, at)
		return 0
	}
	log := ctrl.LoggerFrom(ctx)
	v := p.Tracker.Look(key, at, p.now())
	switch {
	case v.TimedOut:
		// Its rollout failed: the guards say so (once) and hold its change.
		p.evicting(ctx, key, cached, true)
		log.V(1).Info("Restart by eviction past the rollout timeout; not looked at again until an event of the workload", "restartedAt", at)
		return 0
	case !v.Look:
		return v.After
	case v.Resumed:
		log.Info("Restart by eviction past the rollout timeout resumed by an event of the workload", "restartedAt", at)
	}
	obj := kind.New()
	if err := p.Fresh.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: key.Name}, obj); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return 0
		}
		return p.failed(ctx, key, cached, at, "get", err)
	}
	pods, err := Pods(ctx, p.Fresh, obj)
	if err != nil {
		return p.failed(ctx, key, obj, at, "list", err)
	}
	in := Input{At: at}
	if t, ok := ServerTime(obj, p.StateKey); ok {
		in.At = t
	}
	in.Want, in.Allowance, in.Order = Allowance(obj)
	byName := map[string]*corev1.Pod{}
	for i := range pods {
		in.Pods = append(in.Pods, FromPod(&pods[i]))
		byName[pods[i].Name] = &pods[i]
	}
	d := Next(in)
	p.evicting(ctx, key, cached, !d.Done)
	if d.Done {
		p.Tracker.Done(key, at)
		log.V(1).Info("Restart by eviction done", "restartedAt", at)
		p.markDone(ctx, key, obj, at)
		return 0
	}
	progressed := false
	for _, name := range d.Evict {
		err := Evict(ctx, p.Client, byName[name])
		if msg, blocked := Blocked(err); blocked {
			if p.Tracker.Say(key, at, msg) {
				log.Info("Eviction refused by a PodDisruptionBudget; trying again with backoff", "pod", key.Namespace+"/"+name, "why", msg)
				p.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonBlocked, "Evict", "%s",
					note.Truncate("Cannot evict pod "+name+" to restart: "+msg))
			}
			break
		}
		if err != nil {
			return p.failed(ctx, key, obj, at, "evict", err)
		}
		progressed = true
		p.Tracker.Say(key, at, "")
		log.Info("Pod evicted to restart the workload", "pod", key.Namespace+"/"+name, "oldPods", d.Old, "restartedAt", at)
	}
	return p.Tracker.Looked(key, at, p.now(), progressed)
}

// failed handles a failed request of a look at key's restart at (obj, the
// workload). A right watcher lacks is said on the workload, in a Warning
// Event naming it, once per restart, and ends the looks until an event of
// the workload: no retry can succeed before a person grants it, and the
// rollout fails at its timeout like any other. Any other error (the API
// server unreachable, say) is retried with the looks' backoff, not the
// work queue's, so that it costs no more than a blocked restart.
func (p *Progress) failed(ctx context.Context, key object.Ref, obj client.Object, at time.Time, op string, err error) time.Duration {
	log := ctrl.LoggerFrom(ctx)
	var denied *ForbiddenError
	if errors.As(err, &denied) {
		msg := "watcher may not " + denied.Right()
		if p.Tracker.Say(key, at, msg) {
			metrics.Errors.WithLabelValues("evict").Inc()
			log.Info("Cannot restart by eviction: a right is missing; not retried until an event of the workload", "right", denied.Right())
			p.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonForbidden, "Evict", "%s", note.Truncate(
				"Cannot restart by eviction: "+msg+" (RBAC: grant it to watcher's service account, or choose another restart strategy); "+
					"the pods were not replaced"))
		}
		p.Tracker.Stopped(key, at)
		return 0
	}
	metrics.Errors.WithLabelValues(op).Inc()
	log.Error(err, "Restart by eviction: request failed; trying again with backoff")
	return p.Tracker.Looked(key, at, p.now(), false)
}

// markDone writes DoneAnnotation on obj, key's workload whose restart at
// is done, so that no later replica looks at it again. A failure is only
// logged: this replica remembers it, and another looks once.
func (p *Progress) markDone(ctx context.Context, key object.Ref, obj client.Object, at time.Time) {
	if p.Sign == nil {
		return
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{ // strings always marshal
		DoneAnnotation: DoneMark(at, string(obj.GetUID()), p.Sign)}}})
	if err := p.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); client.IgnoreNotFound(err) != nil {
		metrics.Errors.WithLabelValues("patch").Inc()
		ctrl.LoggerFrom(ctx).Error(err, "Cannot mark the restart by eviction done", "workload", key.String())
	}
}

// evicting tells the rollouts, if any, of a look's result.
func (p *Progress) evicting(ctx context.Context, key object.Ref, obj client.Object, rolling bool) {
	if p.Rollouts != nil {
		p.Rollouts.Evicting(ctx, key, obj, rolling)
	}
}

// now is the clock.
func (p *Progress) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}
