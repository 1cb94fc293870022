package explain

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/plan"
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

// pins reports whether the workload obj, whose references are uses, pins
// its config: its annotation, or a ReloadPolicy with pin that applies to
// it, as the controller reads them.
func (s Settings) pins(obj client.Object, uses []refs.Ref) bool {
	if pin.Wanted(optin.Of(obj)) {
		return true
	}
	if s.Policies == nil {
		return false
	}
	a, err := s.Policies.For(obj, uses, s.configs())
	return err == nil && a.Pin
}

// pinOf says how the source u of the workload obj, which pins its config
// when pinned, is read; nil when it does not, or u is no ConfigMap or
// Secret.
func pinOf(obj client.Object, pinned bool, u Use, cfg Config) *Pin {
	if !pinned {
		return nil
	}
	ann := optin.Of(obj)
	src, ok := pin.SourceOf(u.Kind, u.Name)
	if !ok {
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

// leftByRollback reports whether the restart p of the workload obj, whose
// sources are configs, would only roll forward to what a rollback left
// (pin.LeftByRollback): the controller does not make it.
func leftByRollback(obj client.Object, configs map[string]Config, p plan.Plan) bool {
	if p.Action != plan.Restart {
		return false
	}
	from := pin.Parse(optin.Of(obj)[pin.RolledBackFrom])
	sources := make([]pin.Source, 0, len(p.Changes))
	for _, c := range p.Changes {
		src, ok := pin.SourceOf(string(c.Ref.Kind), c.Ref.Name)
		if !ok {
			return false
		}
		sources = append(sources, src)
	}
	return pin.LeftByRollback(from, sources, func(src pin.Source) string {
		cfg := configs[map[string]string{pin.ConfigMap: "ConfigMap", pin.Secret: "Secret"}[src.Kind]+"/"+src.Name]
		if cfg.Sum == "" {
			return ""
		}
		return pin.SnapshotName(src.Name, cfg.Sum)
	})
}
