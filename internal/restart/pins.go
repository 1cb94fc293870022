package restart

import (
	"encoding/json"

	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/workload"
)

// WithPins adds to patch, a restart's patch of a workload of kind (as
// PatchFor makes it), the pins of the revision it starts: pin.PinsAnnotation
// and pin.PinnedLabel on the pod template, pin.RevisionLabel on the
// workload, and the removal of pin.RolledBackFrom (a new content rolls).
// With no pins, it removes them all: the new pods read the live objects.
// mac is the pins' signature (pin.Pins.Sign), written beside them as
// pin.SignatureAnnotation. wanted: the workload asks for pinning, so no
// pins are marked pin.UnpinnedRevision rather than removed. Still one patch; metadata merges alike in a
// JSON merge patch and a strategic merge patch.
func WithPins(patch []byte, kind workload.Kind, pins pin.Pins, mac string, wanted bool) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, err
	}
	var revision, pinned, written, signed any // null: removed
	if wanted {
		revision = pin.UnpinnedRevision
	}
	if len(pins) > 0 {
		revision, pinned, written = pins.Digest(), "true", pins.String()
		if mac != "" {
			signed = mac
		}
	}
	meta := child(m, "metadata")
	child(meta, "labels")[pin.RevisionLabel] = revision
	child(meta, "annotations")[pin.RolledBackFrom] = nil
	at := m
	for _, step := range kind.Template {
		at = child(at, step)
	}
	tm := child(at, "metadata")
	child(tm, "annotations")[pin.PinsAnnotation] = written
	child(tm, "annotations")[pin.SignatureAnnotation] = signed
	child(tm, "labels")[pin.PinnedLabel] = pinned
	return json.Marshal(m)
}

// child returns m[k] as a map, making it when absent.
func child(m map[string]any, k string) map[string]any {
	if c, ok := m[k].(map[string]any); ok {
		return c
	}
	c := map[string]any{}
	m[k] = c
	return c
}
