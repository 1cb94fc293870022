package explain

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/refs"
)

// Pin is how a source of a workload that pins its config is read.
type Pin struct {
	// State is pinned (its pods read Snapshot), floating (they read the
	// live object: Reason says why) or next (pinned at the next restart).
	State    string `json:"state"`
	Snapshot string `json:"snapshot,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// The states of Pin.
const (
	PinPinned   = "pinned"
	PinFloating = "floating"
	PinNext     = "next-restart"
)

// pinOf says how the source u of the workload obj is read, nil when obj
// does not pin its config or u is no ConfigMap or Secret.
func pinOf(obj client.Object, u Use, cfg Config) *Pin {
	ann := optin.Of(obj)
	if !pin.Wanted(ann) {
		return nil
	}
	src := pin.Source{Kind: pin.ConfigMap, Name: u.Name}
	switch refs.Kind(u.Kind) {
	case refs.ConfigMap:
	case refs.Secret:
		src.Kind = pin.Secret
	default:
		return nil
	}
	if why := pin.Floats(src.Kind, cfg.Type, cfg.Annotations); why != "" {
		return &Pin{State: PinFloating, Reason: why}
	}
	if snap, ok := optin.TemplatePins(ann)[src]; ok {
		return &Pin{State: PinPinned, Snapshot: snap}
	}
	return &Pin{State: PinNext}
}
