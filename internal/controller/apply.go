package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/workload"
)

// apply carries out p on obj with at most one patch. Every patch carries
// obj's resourceVersion, so it fails with a conflict instead of acting on a
// stale decision.
func (r *Reconciler) apply(ctx context.Context, key workload.Key, obj client.Object, p plan.Plan) error {
	log := ctrl.LoggerFrom(ctx)
	for _, c := range p.Ignored {
		log.V(1).Info("Change ignored: the object opted out", "source", describe(key.Namespace, c), "reason", plan.SkipConfigOptedOut)
	}
	if p.Action == plan.None {
		return nil
	}
	if err := r.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patchFor(obj, p, r.Config.Hasher.ID()))); err != nil {
		return fmt.Errorf("patch %s: %w", key, err)
	}
	switch p.Action {
	case plan.Forget:
		log.V(1).Info("Workload opted out; record removed")
	case plan.Adopt:
		metrics.Adoptions.WithLabelValues(key.Kind).Inc()
		log.V(1).Info("Workload adopted: hashes recorded, nothing restarted")
	case plan.Refresh:
		log.V(1).Info("Record refreshed, nothing restarted")
	case plan.Restart:
		metrics.Restarts.WithLabelValues(key.Kind).Inc()
		var why, note []string
		for _, c := range p.Changes {
			why = append(why, describe(key.Namespace, c)+" changed (keys: "+strings.Join(c.Keys, ",")+")")
			note = append(note, fmt.Sprintf("%s %s changed (keys: %s; %s→%s)", c.Ref.Kind, c.Ref.Name, strings.Join(c.Keys, ", "), c.Old, c.New))
		}
		log.Info("restarted "+key.String()+" because "+strings.Join(why, ", "), "restartedFor", p.Record.RestartID())
		r.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, "Restarted", "Restart", "Restarted because %s", strings.Join(note, "; "))
	}
	return nil
}

// describe names the object of a change as "Kind namespace/name".
func describe(namespace string, c plan.Change) string {
	return string(c.Ref.Kind) + " " + namespace + "/" + c.Ref.Name
}

// patchFor builds the JSON merge patch for p: the record and the ID of its
// hash key on the workload's metadata, the restart annotation on its pod
// template for a restart, and the resourceVersion precondition.
func patchFor(obj client.Object, p plan.Plan, hashKeyID string) []byte {
	var record, key any = nil, nil // Forget removes the annotations
	if p.Action != plan.Forget {
		record, key = p.Record.String(), hashKeyID
	}
	patch := map[string]any{
		"metadata": map[string]any{
			"resourceVersion": obj.GetResourceVersion(),
			"annotations":     map[string]any{plan.RecordAnnotation: record, plan.HashKeyAnnotation: key},
		},
	}
	if p.Action == plan.Restart {
		patch["spec"] = map[string]any{"template": map[string]any{"metadata": map[string]any{
			"annotations": map[string]string{plan.RestartAnnotation: p.Record.RestartID()},
		}}}
	}
	b, _ := json.Marshal(patch) // maps of strings always marshal
	return b
}
