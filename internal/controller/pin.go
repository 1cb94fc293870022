package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/note"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/slim"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Event reasons of pinned config revisions.
const (
	ReasonRolledBack     = "RolledBack"
	ReasonPinsStripped   = "PinsStripped"
	ReasonPinningOff     = "PinningOff"
	ReasonPinNameTaken   = "PinNameTaken"
	ReasonPinBudgetSpent = "PinBudgetSpent"
)

// pinning reports whether the restarts of w write pins: pinning is on, its
// kind keeps templates in revisions, it is not in dry-run, its restart
// changes the template (not evict), and it asks for pinning or its
// template still has pins (then they are removed).
func (r *Reconciler) pinning(w *gathered) bool {
	if r.Config.Snapshots == nil || w.dry != nil {
		return false
	}
	if k, ok := workload.ByName(w.key.Kind); !ok || !k.Pinnable {
		return false
	}
	if _, evicts := w.strategy.(restart.Evict); evicts {
		return false
	}
	return wantsPins(w, w.obj) || len(optin.TemplatePins(optin.Of(w.obj))) > 0
}

// wantsPins reports whether the workload w (as obj) asks for pinning: its
// annotation, or a ReloadPolicy that applies to it.
func wantsPins(w *gathered, obj client.Object) bool {
	return pin.Wanted(optin.Of(obj)) || w.applied.Pin
}

// pinVerdict acts, before p is applied, on what the template of a
// workload that pins says (pin.Judge): a rollback is recorded and nothing
// else done (done); pins stripped are written again by a restart; a
// restart only to the contents a rollback left (pin.RolledBackFrom) is
// not made.
func (r *Reconciler) pinVerdict(ctx context.Context, w *gathered, p plan.Plan) (_ plan.Plan, done bool, _ error) {
	if !r.pinning(w) {
		return p, false, nil
	}
	if !wantsPins(w, w.obj) {
		return p, false, nil
	}
	ann := optin.Of(w.obj)
	template := optin.TemplatePins(ann)
	verdict := pin.Judge(template, slim.Labels(w.obj).Get(pin.RevisionLabel))
	var missing []string
	if verdict == pin.RolledBack {
		missing = r.missingSnapshots(w.key.Namespace, template)
	}
	switch {
	case verdict == pin.RolledBack && len(missing) == 0:
		return plan.Plan{}, true, r.rolledBack(ctx, w, template)
	case verdict == pin.RolledBack, verdict == pin.Stripped:
		why := "The pod template lost its pins (" + pin.PinsAnnotation + ")"
		if len(missing) > 0 { // a manifest copied from elsewhere: its pods could not start
			why = note.Join("The pod template pins snapshots that do not exist: ", missing)
		}
		p = repin(p, w.in.Recorded)
		if p.Action == plan.Restart {
			r.Recorder.Eventf(w.obj, nil, corev1.EventTypeWarning, ReasonPinsStripped, "Pin", "%s",
				note.Truncate(why+"; restarting once to pin its config again"))
		}
	}
	from := pin.Parse(ann[pin.RolledBackFrom])
	if p.Action == plan.Restart && len(from) > 0 && r.onlyRolledBackFrom(w.key.Namespace, p, from) {
		ctrl.LoggerFrom(ctx).Info("Not restarting: the changes are the contents a rollback left; a new content, or removing the annotation, rolls forward",
			"annotation", pin.RolledBackFrom)
		return plan.Plan{Action: plan.None}, false, nil
	}
	return p, false, nil
}

// repin makes p a restart, to write the pins again, when it is none (or
// only a record refresh): with the record it would write, or recorded.
func repin(p plan.Plan, recorded plan.Record) plan.Plan {
	if p.Action != plan.None && p.Action != plan.Refresh {
		return p
	}
	if p.Record == nil {
		p.Record = recorded
	}
	if p.Record != nil {
		p.Action = plan.Restart
	}
	return p
}

// missingSnapshots names the snapshots of pins that the store does not
// hold.
func (r *Reconciler) missingSnapshots(ns string, pins pin.Pins) []string {
	var out []string
	for _, src := range sortedSources(pins) {
		if obj, err := r.Store.Get(storeKind(src), ns, pins[src]); err == nil && obj == nil {
			out = append(out, src.Kind+" "+pins[src])
		}
	}
	return out
}

// onlyRolledBackFrom reports whether every change of p is a source now at
// the content (snapshot) from says a rollback left (pin.LeftByRollback).
func (r *Reconciler) onlyRolledBackFrom(ns string, p plan.Plan, from pin.Pins) bool {
	sources := make([]pin.Source, 0, len(p.Changes))
	for _, c := range p.Changes {
		src, ok := pinSource(c.Ref)
		if !ok {
			return false
		}
		sources = append(sources, src)
	}
	return pin.LeftByRollback(from, sources, func(src pin.Source) string {
		live, _ := r.liveSnapshot(ns, src)
		return live
	})
}

// rolledBack records a native rollback of w, whose template now pins
// template: the revision it runs (pin.RevisionLabel) and the contents it
// left (pin.RolledBackFrom), with an Event naming each source's snapshot
// before and after. One patch; nothing restarts.
func (r *Reconciler) rolledBack(ctx context.Context, w *gathered, template pin.Pins) error {
	left := pin.Pins{}
	var notes []string
	for _, src := range sortedSources(template) {
		live, ok := r.liveSnapshot(w.key.Namespace, src)
		if !ok || live == template[src] {
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
// patched) and returns the pins to write: none when w no longer asks for
// pinning, or when pinning is not installed (then said in a Warning), so
// that its pods read the live objects.
func (r *Reconciler) pinsFor(ctx context.Context, w *gathered, obj client.Object) (pin.Pins, error) {
	if !wantsPins(w, obj) {
		return nil, nil
	}
	if w.applied.Pin && r.Config.Policies != nil && r.Config.Policies.Status != nil {
		for _, p := range w.applied.Policies {
			if p.Pin {
				r.Config.Policies.Status.Enqueue(p.Key()) // its condition Pinned
			}
		}
	}
	if err := r.Config.Snapshots.Installed(ctx); err != nil {
		metrics.PinningAvailable.Set(0)
		metrics.PinnedRestarts.WithLabelValues("unpinned").Inc()
		if r.pinningOff.first(obj.GetUID(), err.Error()) { // once per workload and cause
			ctrl.LoggerFrom(ctx).Error(err, "Pinning is off")
			r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonPinningOff, "Pin", "%s", note.Truncate(err.Error()))
		}
		return nil, nil
	}
	r.pinningOff.forget(obj.GetUID())
	metrics.PinningAvailable.Set(1)
	var sources []pin.Source
	for _, ref := range w.in.Refs {
		if src, ok := pinSource(ref); ok && w.in.Configs[ref.ID()].Present {
			sources = append(sources, src)
		}
	}
	k, _ := workload.ByName(w.key.Kind)
	res, err := r.Config.Snapshots.Make(ctx, obj, metav1.TypeMeta{APIVersion: k.APIVersion(), Kind: k.Name()}, sources)
	if err != nil {
		return nil, err
	}
	for _, src := range sources {
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
			note.Join("Left live, not pinned: the name of its snapshot is taken by an object that is not its snapshot, or the API server refused it: ", names(res.Taken)))
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

// liveSnapshot names the snapshot of src's content now, as the store holds
// its digest.
func (r *Reconciler) liveSnapshot(ns string, src pin.Source) (string, bool) {
	obj, err := r.Store.Get(storeKind(src), ns, src.Name)
	if err != nil || obj == nil {
		return "", false
	}
	d, err := hash.FromObject(obj)
	if err != nil {
		return "", false
	}
	return pin.SnapshotName(src.Name, d.Sum), true
}

// sortedSources returns the sources of p in order.
func sortedSources(p pin.Pins) []pin.Source {
	out := make([]pin.Source, 0, len(p))
	for s := range p {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b pin.Source) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// names writes sources as "kind name".
func names(sources []pin.Source) []string {
	out := make([]string, len(sources))
	for i, s := range sources {
		out[i] = s.Kind + " " + s.Name
	}
	return out
}
