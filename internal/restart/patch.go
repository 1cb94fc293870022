package restart

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/evict"
	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/workload"
)

// PatchFor builds the one patch for p: the record, its version and the ID
// of its hash key on the workload's metadata, for a restart the strategy's change of the
// pod template (where kind keeps it) with the guards' state (state, unless
// ""), and the resourceVersion precondition.
// It is a JSON merge patch, unless the strategy's change needs another type
// (a strategic merge patch for the env strategy): metadata merges alike in
// both, a null removing an annotation.
func PatchFor(obj client.Object, p plan.Plan, hashKeyID string, kind workload.Kind, s Strategy, state string) (types.PatchType, []byte) {
	var record, key, version any = nil, nil, nil // Forget removes the annotations
	if p.Action != plan.Forget {
		record, key, version = p.Record.String(), hashKeyID, plan.FormatVersion(p.Record, p.Version)
	}
	patch := map[string]any{
		"metadata": map[string]any{
			"resourceVersion": obj.GetResourceVersion(),
			"annotations":     map[string]any{plan.RecordAnnotation: record, plan.HashKeyAnnotation: key, plan.VersionAnnotation: version},
		},
	}
	patchType := types.MergePatchType
	if p.Action == plan.Restart && state != "" {
		patch["metadata"].(map[string]any)["annotations"].(map[string]any)[guard.StateAnnotation] = state
	}
	// The change set of the template recorded with the record (the next
	// release is told from it: hold.Guards.InRelease).
	if id := optin.TemplateChangeSet(optin.Of(obj)); id != "" && p.Action != plan.Forget {
		patch["metadata"].(map[string]any)["annotations"].(map[string]any)[optin.RecordedChangeSet] = id
	} else if _, ok := obj.GetAnnotations()[optin.RecordedChangeSet]; ok {
		patch["metadata"].(map[string]any)["annotations"].(map[string]any)[optin.RecordedChangeSet] = nil
	}
	if _, waited := obj.GetAnnotations()[guard.PendingAnnotation]; waited && p.Action == plan.Restart {
		// The change set it waited for rolls out now.
		patch["metadata"].(map[string]any)["annotations"].(map[string]any)[guard.PendingAnnotation] = nil
	}
	if p.Action == plan.Restart {
		var at map[string]any
		patchType, at = Patch(s, Workload{Kind: kind, Object: obj, ID: p.Record.RestartID()})
		for k, v := range at { // "spec", for every kind
			patch[k] = v
		}
	}
	b, _ := json.Marshal(patch) // maps of strings always marshal
	return patchType, b
}

// PatchOptions are the options of the patch that writes p with the
// strategy s: a restart by eviction is written by evict.FieldManager,
// whose managedFields entry then holds the API server's time of it.
func PatchOptions(s Strategy, p plan.Plan) []client.PatchOption {
	if _, ok := s.(Evict); ok && p.Action == plan.Restart {
		return []client.PatchOption{client.FieldOwner(evict.FieldManager)}
	}
	return nil
}
