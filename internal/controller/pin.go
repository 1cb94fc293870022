package controller

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

	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/note"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/snapshot"
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

// SnapshotView sees every snapshot and pinned revision of the namespaces
// watched, whatever --config-selector keeps in the store
// (snapshot.Owners); known is false until it has synced.
type SnapshotView interface {
	Has(ns, kind, name string) (exists, known bool)
	PinnedBefore(ns string, uid types.UID) (pinned, known bool)
}

// verdictFacts returns what the rules after the decision (package verdict) read
// of w: its sources, as gathered, and its pin facts. The one place the
// controller builds them; explain and stale build the same from what
// they read.
func (r *Reconciler) verdictFacts(ctx context.Context, w *gathered) (verdict.Facts, error) {
	_, evicts := w.strategy.(restart.Evict)
	f := verdict.Gather(w.obj, w.in, w.applied.Pin, evicts)
	var err error
	f.Pin, err = r.pinFacts(ctx, w, f.Pin)
	return f, err
}

// pinFacts completes the pin facts f of w. Pinning is on
// for it when the installation pins (the admission policy is installed:
// only its absence turns pinning off; any other error is returned, to
// try again), its kind keeps templates in revisions, and it is not in
// dry-run; the policy is read only for a workload that pins or has pins.
func (r *Reconciler) pinFacts(ctx context.Context, w *gathered, f verdict.Pinning) (verdict.Pinning, error) {
	k, ok := workload.ByName(w.key.Kind)
	if r.Config.Snapshots == nil || w.dry != nil || !ok || !k.Pinnable || (!f.Wanted && len(f.Template) == 0) {
		return f, nil
	}
	if err := r.Config.Snapshots.Installed(ctx); err != nil {
		if !errors.Is(err, snapshot.ErrOff) {
			metrics.Errors.WithLabelValues("get").Inc()
			return f, err
		}
		metrics.PinningAvailable.Set(0)
		if f.Wanted && r.pinningOff.first(w.obj.GetUID(), err.Error()) { // once per workload and cause
			ctrl.LoggerFrom(ctx).Error(err, "Pinning is off")
			r.Recorder.Eventf(w.obj, nil, corev1.EventTypeWarning, ReasonPinningOff, "Pin", "%s", note.Truncate(err.Error()))
		}
		return f, nil
	}
	r.pinningOff.forget(w.obj.GetUID())
	metrics.PinningAvailable.Set(1)
	f.On = true
	if !f.Wanted || f.Evicts {
		return f, nil
	}
	missing, err := r.missingSnapshots(ctx, w.key.Namespace, f.Template)
	if err != nil {
		return f, err
	}
	f.Missing = missing
	if len(f.Template) == 0 && f.Revision == "" && r.Config.SnapshotView != nil {
		f.PinnedBefore, _ = r.Config.SnapshotView.PinnedBefore(w.key.Namespace, w.obj.GetUID())
	}
	return f, nil
}

// missingSnapshots names the snapshots of pins that do not exist, as the
// snapshot view sees them (every snapshot, whatever --config-selector
// keeps in the store), or the API server until it has synced.
func (r *Reconciler) missingSnapshots(ctx context.Context, ns string, pins pin.Pins) ([]string, error) {
	var out []string
	for _, src := range pin.Sorted(pins) {
		exists, known := false, false
		if r.Config.SnapshotView != nil {
			exists, known = r.Config.SnapshotView.Has(ns, src.Kind, pins[src])
		}
		if !known {
			m := &metav1.PartialObjectMetadata{}
			m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(storeKind(src)))
			err := r.Fresh.Get(ctx, types.NamespacedName{Namespace: ns, Name: pins[src]}, m)
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

// afterDecision runs the rules after the decision (verdict.Apply) on p,
// decided for w, and says what they did: a release that carries the
// change, a rollback recorded (done: nothing else to do), pins written
// again, a restart only to a rollback's content not made.
func (r *Reconciler) afterDecision(ctx context.Context, w *gathered, p plan.Plan) (_ verdict.Outcome, done bool, _ error) {
	f, err := r.verdictFacts(ctx, w)
	if err != nil {
		return verdict.Outcome{}, false, err
	}
	out := verdict.Apply(f, p)
	switch out.Rule {
	case verdict.RuleInRelease:
		r.inRelease(ctx, w.obj)
	case verdict.RuleRolledBack:
		return out, true, r.rolledBack(ctx, w, f)
	case verdict.RuleRepin:
		if out.Plan.Action == plan.Restart {
			r.Recorder.Eventf(w.obj, nil, corev1.EventTypeWarning, ReasonPinsStripped, "Pin", "%s",
				note.Truncate(out.Why+"; restarting once to pin its config again"))
		}
	case verdict.RuleLeftByRollback:
		ctrl.LoggerFrom(ctx).Info("Not restarting: the changes are the contents a rollback left; a new content, or removing the annotation, rolls forward",
			"annotation", pin.RolledBackFrom)
	}
	if out.Template {
		w.strategy = r.templateStrategy()
		ctrl.LoggerFrom(ctx).Info("Restarting by writing the pod template once: its strategy cannot keep the pins it has, they are removed")
	}
	if out.Stale {
		r.stale.set(w.key, true)
	}
	return out, false, nil
}

// templateStrategy is the strategy of a restart that must write the pod
// template: the installation's, unless it is evict.
func (r *Reconciler) templateStrategy() restart.Strategy {
	if _, evicts := r.Config.Strategy.(restart.Evict); evicts || r.Config.Strategy == nil {
		return restart.Annotation{}
	}
	return r.Config.Strategy
}

// rolledBack records a native rollback of w, whose template now pins
// template: the revision it runs (pin.RevisionLabel) and the contents it
// left (pin.RolledBackFrom), with an Event naming each source's snapshot
// before and after. One patch; nothing restarts.
func (r *Reconciler) rolledBack(ctx context.Context, w *gathered, f verdict.Facts) error {
	template := f.Pin.Template
	left := pin.Pins{}
	var notes []string
	for _, src := range pin.Sorted(template) {
		live := f.Sources[string(storeKind(src))+"/"+src.Name].Snapshot
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
		"resourceVersion": w.obj.GetResourceVersion(),
		"labels":          map[string]string{pin.RevisionLabel: template.Digest()},
		"annotations":     map[string]any{pin.RolledBackFrom: from},
	}})
	if err := r.Client.Patch(ctx, w.obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return r.patchFailed(ctx, w.key, w.obj, err)
	}
	metrics.Rollbacks.WithLabelValues(w.key.Kind).Inc()
	msg := "Rolled back: the pods read their config as pinned by the revision rolled back to"
	if len(notes) > 0 {
		msg = note.Join(msg+"; not rolling forward to what it left until it changes again or "+pin.RolledBackFrom+" is removed: ", notes)
	}
	ctrl.LoggerFrom(ctx).Info("Rollback seen; recorded, nothing restarted", "sources", len(template), "left", len(left))
	r.Recorder.Eventf(w.obj, nil, corev1.EventTypeNormal, ReasonRolledBack, "Pin", "%s", note.Truncate(msg))
	return nil
}

// pinsFor makes the snapshots of the restart of w (obj, as it will be
// patched) of the sources out says it pins, and returns the pins to write
// (none: the pins are removed, the pods read the live objects).
func (r *Reconciler) pinsFor(ctx context.Context, w *gathered, obj client.Object, out verdict.Outcome) (pin.Pins, error) {
	if w.applied.Pin && r.Config.Policies != nil && r.Config.Policies.Status != nil {
		for _, p := range w.applied.Policies {
			if p.Pin {
				r.Config.Policies.Status.Enqueue(p.Key()) // its condition Pinned
			}
		}
	}
	if out.TooMany {
		metrics.PinnedRestarts.WithLabelValues("unpinned").Inc()
		r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonPinsTooMany, "Pin", "%s",
			note.Truncate(fmt.Sprintf("Not pinned: the pods read more than %d ConfigMaps and Secrets, more than the admission policy can evaluate; they read the live objects", pin.MaxPins)))
		return nil, nil
	}
	if len(out.Pins) == 0 {
		return nil, nil
	}
	k, _ := workload.ByName(w.key.Kind)
	res, err := r.Config.Snapshots.Make(ctx, obj, metav1.TypeMeta{APIVersion: k.APIVersion(), Kind: k.Name()}, out.Pins)
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
	if len(res.Taken) > 0 {
		outcome = "partial"
		r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonPinNameTaken, "Pin", "%s",
			note.Join("Left live, not pinned: the name of its snapshot is taken by an object that is not its snapshot: ", names(res.Taken)))
	}
	if len(res.Refused) > 0 {
		outcome = "partial"
		r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonPinRefused, "Pin", "%s",
			note.Join("Left live, not pinned: the API server refused its snapshot (a quota, an admission policy): ", names(res.Refused)))
	}
	if len(res.OverBudget) > 0 {
		outcome = "partial"
		r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonPinBudgetSpent, "Pin", "%s",
			note.Join("Left live, not pinned: the namespace's snapshot budget (--pinning-budget) is spent: ", names(res.OverBudget)))
	}
	metrics.PinnedRestarts.WithLabelValues(outcome).Inc()
	return res.Pins, nil
}

// pinSign signs the pins watcher writes (pin.SignatureAnnotation) with the
// installation's key; nil without one.
func (r *Reconciler) pinSign() pin.Signer {
	if r.Config.Hasher == nil {
		return nil
	}
	return r.Config.Hasher.MAC
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

// pinSource is the pin.Source of a reference to a ConfigMap or Secret.
func pinSource(ref refs.Ref) (pin.Source, bool) { return pin.SourceOf(string(ref.Kind), ref.Name) }

// storeKind is the kind under which the store keeps src's kind.
func storeKind(src pin.Source) string {
	if src.Kind == pin.Secret {
		return string(refs.Secret)
	}
	return string(refs.ConfigMap)
}

// names writes sources as "kind name".
func names(sources []pin.Source) []string {
	out := make([]string, len(sources))
	for i, s := range sources {
		out[i] = s.Kind + " " + s.Name
	}
	return out
}
