package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/note"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/verdict"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Event reasons of pinned config revisions.
const (
	ReasonRolledBack     = "RolledBack"
	ReasonPinsStripped   = "PinsStripped"
	ReasonPinningOff     = "PinningOff"
	ReasonPinNameTaken   = "PinNameTaken"
	ReasonPinBudgetSpent = "PinBudgetSpent"
	ReasonPinsTooMany    = "PinsTooMany"
	ReasonPinRefused     = "PinRefused"
)

// View sees every snapshot and pinned revision of the namespaces watched,
// whatever --config-selector keeps in the controller's store (Owners);
// known is false until it has synced.
type View interface {
	Has(ns, kind, name string) (exists, known bool)
	PinnedBefore(ns string, uid types.UID) (pinned, known bool)
}

// Pinner is the controller's pin writer: it completes a workload's pin
// facts (Facts: is pinning installed, do its snapshots exist, was it
// pinned before), makes the snapshots of a restart (Pins) and records a
// native rollback (RolledBack), acting on what the rules after the
// decision said (package verdict); it decides nothing itself.
type Pinner struct {
	// Maker makes the snapshots; nil: pinning is off.
	Maker *Maker
	// View answers whether snapshots exist; nil: Fresh is asked.
	View View
	// Client patches the workload; Fresh reads snapshots from the API
	// server.
	Client client.Client
	Fresh  client.Reader
	// Recorder emits Events on the workloads.
	Recorder recorder.EventRecorder

	// off says once per workload and cause that pinning is off.
	off said
}

// Facts completes the pin facts f of the workload obj of kind, in dry-run
// or not. Pinning is on for it when the admission policy is installed
// (only its absence turns pinning off; any other error is returned, to
// try again), its kind keeps templates in revisions, and it is not in
// dry-run; the policy is read only for a workload that pins or has pins.
func (p *Pinner) Facts(ctx context.Context, obj client.Object, kind workload.Kind, dry bool, f verdict.Pinning) (verdict.Pinning, error) {
	if p == nil || p.Maker == nil || dry || !kind.Pinnable || (!f.Wanted && len(f.Template) == 0) {
		return f, nil
	}
	if err := p.Maker.Installed(ctx); err != nil {
		if !errors.Is(err, ErrOff) {
			metrics.Errors.WithLabelValues("get").Inc()
			return f, err
		}
		metrics.PinningAvailable.Set(0)
		if f.Wanted && p.off.first(obj.GetUID(), err.Error()) { // once per workload and cause
			ctrl.LoggerFrom(ctx).Error(err, "Pinning is off")
			p.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonPinningOff, "Pin", "%s", note.Truncate(err.Error()))
		}
		return f, nil
	}
	p.off.forget(obj.GetUID())
	metrics.PinningAvailable.Set(1)
	missing, err := p.missing(ctx, obj.GetNamespace(), f.Template)
	if err != nil {
		return f, err
	}
	before := false
	if f.NeedsPinnedBefore() && p.View != nil {
		before, _ = p.View.PinnedBefore(obj.GetNamespace(), obj.GetUID())
	}
	return f.Completed(true, missing, before), nil
}

// missing names the snapshots of pins that do not exist, as the view sees
// them (every snapshot, whatever --config-selector keeps in the store), or
// the API server until it has synced.
func (p *Pinner) missing(ctx context.Context, ns string, pins pin.Pins) ([]string, error) {
	var out []string
	for _, src := range pin.Sorted(pins) {
		exists, known := false, false
		if p.View != nil {
			exists, known = p.View.Has(ns, src.Kind, pins[src])
		}
		if !known {
			m := &metav1.PartialObjectMetadata{}
			m.SetGroupVersionKind(gvkOf(src.Kind))
			err := p.Fresh.Get(ctx, types.NamespacedName{Namespace: ns, Name: pins[src]}, m)
			if err != nil && !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("get snapshot %s/%s: %w", ns, pins[src], err)
			}
			exists = err == nil
		}
		if !exists {
			out = append(out, src.Kind+" "+pins[src])
		}
	}
	return out, nil
}

// RolledBack records a native rollback of the workload obj of kind, whose
// facts are f: the revision it runs (pin.RevisionLabel) and the contents
// it left (pin.RolledBackFrom), with an Event naming each source's
// snapshot before and after. One patch; nothing restarts. The patch's
// error is returned as it is.
func (p *Pinner) RolledBack(ctx context.Context, obj client.Object, kind workload.Kind, f verdict.Facts) error {
	template := f.Pin.Template
	left := pin.Pins{}
	var notes []string
	for _, src := range pin.Sorted(template) {
		live := f.Sources[src.ID()].Snapshot
		if live == "" || live == template[src] {
			continue
		}
		left[src] = live
		notes = append(notes, fmt.Sprintf("%s %s back to %s from %s", src.Kind, src.Name, template[src], live))
	}
	var from any
	if len(left) > 0 {
		from = left.String()
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{ // strings always marshal
		"resourceVersion": obj.GetResourceVersion(),
		"labels":          map[string]string{pin.RevisionLabel: template.Digest()},
		"annotations":     map[string]any{pin.RolledBackFrom: from},
	}})
	if err := p.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return err
	}
	metrics.Rollbacks.WithLabelValues(kind.Name()).Inc()
	msg := "Rolled back: the pods read their config as pinned by the revision rolled back to"
	if len(notes) > 0 {
		msg = note.Join(msg+"; not rolling forward to what it left until it changes again or "+pin.RolledBackFrom+" is removed: ", notes)
	}
	ctrl.LoggerFrom(ctx).Info("Rollback seen; recorded, nothing restarted", "sources", len(template), "left", len(left))
	p.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, ReasonRolledBack, "Pin", "%s", note.Truncate(msg))
	return nil
}

// Pins makes the snapshots of the restart of obj (as it will be patched),
// of kind, of the sources out says it pins, and returns the pins to write
// (none: the pins are removed, the pods read the live objects). What is
// left live is said in a Warning per cause.
func (p *Pinner) Pins(ctx context.Context, obj client.Object, kind workload.Kind, out verdict.Outcome) (pin.Pins, error) {
	if out.TooMany {
		metrics.PinnedRestarts.WithLabelValues("unpinned").Inc()
		p.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonPinsTooMany, "Pin", "%s",
			note.Truncate(fmt.Sprintf("Not pinned: the pods read more than %d ConfigMaps and Secrets, more than the admission policy can evaluate; they read the live objects", pin.MaxPins)))
		return nil, nil
	}
	if len(out.Pins) == 0 {
		return nil, nil
	}
	res, err := p.Maker.Make(ctx, obj, metav1.TypeMeta{APIVersion: kind.APIVersion(), Kind: kind.Name()}, out.Pins)
	if err != nil {
		return nil, err
	}
	for _, src := range out.Pins {
		if _, ok := res.Pins[src]; ok {
			how := "reused"
			if slices.Contains(res.Made, src) {
				how = "made"
			}
			metrics.Snapshots.WithLabelValues(src.Kind, how).Inc()
		}
	}
	outcome := "pinned"
	for _, w := range []struct {
		sources     []pin.Source
		reason, why string
	}{
		{res.Taken, ReasonPinNameTaken, "the name of its snapshot is taken by an object that is not its snapshot"},
		{res.Refused, ReasonPinRefused, "the API server refused its snapshot (a quota, an admission policy)"},
		{res.OverBudget, ReasonPinBudgetSpent, "the namespace's snapshot budget (--pinning-budget) is spent"},
	} {
		if len(w.sources) > 0 {
			outcome = "partial"
			p.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, w.reason, "Pin", "%s", note.Join("Left live, not pinned: "+w.why+": ", names(w.sources)))
		}
	}
	metrics.PinnedRestarts.WithLabelValues(outcome).Inc()
	return res.Pins, nil
}

// names writes sources as "kind name".
func names(sources []pin.Source) []string {
	out := make([]string, len(sources))
	for i, s := range sources {
		out[i] = s.Kind + " " + s.Name
	}
	return out
}

// said remembers, per workload, the last cause of a Warning said, so that
// it is said once per workload and cause, not at every restart.
type said struct {
	mu   sync.Mutex
	last map[types.UID]string
}

// first reports whether why is new for the workload uid, and remembers it.
func (s *said) first(uid types.UID, why string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = map[types.UID]string{}
	}
	if s.last[uid] == why {
		return false
	}
	s.last[uid] = why
	return true
}

// forget drops what was said of uid: the cause is gone.
func (s *said) forget(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.last, uid)
}
