package restart

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// RestartedAtAnnotation is the pod-template annotation `kubectl rollout
// restart` writes: the time of the restart, RFC 3339.
const RestartedAtAnnotation = "kubectl.kubernetes.io/restartedAt"

// RestartedAt restarts as `kubectl rollout restart` does: it sets
// RestartedAtAnnotation on the pod template to the time of the restart,
// with a JSON merge patch (every kind takes one). Many operators that own
// their workloads' templates keep this one annotation, and GitOps tools are
// commonly told to ignore it in their diffs.
//
// Whether to restart is still decided by the recorded hashes (plan.Decide),
// never by this value: only what is written is a time, so the same
// configuration is never restarted twice, and a restart of watcher writes
// nothing new. Whether a rollout is watcher's is read from the workload's
// restart state (guard.StateAnnotation), as for the other strategies.
type RestartedAt struct {
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Name implements Strategy.
func (RestartedAt) Name() string { return "restarted-at" }

// Template implements Strategy.
func (s RestartedAt) Template(Workload) (types.PatchType, map[string]any) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	return types.MergePatchType, map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{RestartedAtAnnotation: now().UTC().Format(time.RFC3339)},
	}}
}
