package restart

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// ArgoRestartAt is the field of an Argo Rollout's spec that makes Argo
// replace, by its own strategy, the pods created before its time.
const ArgoRestartAt = "restartAt"

// Evict restarts without changing the pod template: the workload's pods
// are evicted through the Eviction API, so that their
// PodDisruptionBudgets hold, by package evict, driven by the controller
// after the restart is written. The restart's write carries only the
// record and the restart state, whose time (guard.State.At) tells the pods
// to replace (those created before it). Per kind:
//
//	kind                      the restart writes           pods replaced by
//	Deployment, StatefulSet,  nothing on the template      watcher, by eviction
//	DaemonSet                 (an empty merge)
//	Argo Rollout              spec.restartAt = the time    Argo, by its strategy
//	                          of the restart, RFC 3339
//	CronJob (no pods to       what Annotation writes       its next Job
//	evict)
//	Job (re-created, see      what Annotation writes, on   the new Job
//	RecreatedJob)             the new Job
type Evict struct {
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Name implements Strategy.
func (Evict) Name() string { return "evict" }

// Template implements Strategy.
func (Evict) Template(w Workload) (types.PatchType, map[string]any) {
	if w.Kind.Evictable {
		return types.MergePatchType, map[string]any{}
	}
	return Annotation{}.Template(w)
}

// Spec returns, for an Argo Rollout, the change of its spec that restarts
// it; false for other kinds.
func (s Evict) Spec(w Workload) (types.PatchType, map[string]any, bool) {
	if w.Kind.Name() != "Rollout" || w.Kind.GVK.Group != "argoproj.io" {
		return "", nil, false
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	return types.MergePatchType, map[string]any{ArgoRestartAt: now().UTC().Format(time.RFC3339)}, true
}

// specStrategy is a Strategy that, for some kinds, restarts by changing
// the workload's spec instead of its pod template.
type specStrategy interface {
	Spec(w Workload) (types.PatchType, map[string]any, bool)
}
