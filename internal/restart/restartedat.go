package restart

import (
	"crypto/sha256"
	"encoding/binary"
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
//
// The value is an RFC 3339 time, as kubectl writes it, to the second, with
// nine fractional digits taken from the restart ID: two restarts in the
// same second (or after the clock went back) still write two values, since
// two restarts in a row never have the same ID, and so both roll the pods;
// the value read as a time is within the second of the restart.
type RestartedAt struct {
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Name implements Strategy.
func (RestartedAt) Name() string { return "restarted-at" }

// Template implements Strategy.
func (s RestartedAt) Template(w Workload) (types.PatchType, map[string]any) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	return types.MergePatchType, map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{RestartedAtAnnotation: restartedAt(now(), w.ID)},
	}}
}

// restartedAt is the value of RestartedAtAnnotation for the restart id at
// t: t's second, in UTC, and nine fractional digits from id (t's own
// without one).
func restartedAt(t time.Time, id string) string {
	t = t.UTC()
	if id != "" {
		sum := sha256.Sum256([]byte(id))
		t = t.Truncate(time.Second).Add(time.Duration(binary.BigEndian.Uint64(sum[:8]) % uint64(time.Second)))
	}
	return t.Format("2006-01-02T15:04:05.000000000Z07:00")
}
