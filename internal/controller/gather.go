package controller

import (
	"context"
	"errors"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/dryrun"
	"github.com/watcher-dev/watcher/internal/gather"
	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/policy"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/verdict"
	"github.com/watcher-dev/watcher/internal/workload"
)

// triaged is what the triage of a change (changeUsers) gathered of a
// user and decided, for its walk.
type triaged struct {
	w *gathered
	p plan.Plan
}

// gathered is what one request knows of one workload: read once, by
// gather, and read by every later step (the decision, apply, the
// policies' bookkeeping, the guards and the eviction step), which ask
// nothing again.
type gathered struct {
	key workload.Key
	// uid and version are those of the workload when gathered.
	uid     types.UID
	version string
	// obj is the workload as read: the store's copy (metadata), or the
	// API server's after a write conflict. The patch writes into it.
	obj client.Object
	// in is the decision's input: the references (the resolver's, and
	// the SecretProviderClasses mounted), the record, the objects now.
	in plan.Input
	// applied is what the ReloadPolicies that apply to it say.
	applied policy.Applied
	// dry is the dry-run memory it is decided with; nil: none (dryFor).
	dry *dryrun.Memory
	// strategy is its restart strategy (strategy.go); badStrategy, the
	// error of an annotation that names none, reported when it is
	// applied.
	strategy    restart.Strategy
	badStrategy error
	// onDelete says why its pods roll only when deleted (its update
	// strategy), "" when they roll on a change of the template.
	onDelete string
	// dryRecord is the dry-run memory's record of it, and mounted the
	// SecretProviderClass versions its pods mount, when gathered (see
	// current).
	dryRecord plan.Record
	dryKnown  bool
	mounted   map[string]map[string]string
	// outcome is what the rules after the decision made of its plan
	// (package verdict): the pins its write carries.
	outcome verdict.Outcome
	// restarted: apply wrote its restart (stale.go).
	restarted bool
	// findings are the malformed annotations and records found, reported
	// once per decision applied (report), never for a decision made only
	// to triage a change.
	findings []func(context.Context)
}

// evicts reports whether the workload has its pods evicted by watcher to
// restart: a kind evict can evict (an Argo Rollout's evict is Argo's
// restartAt; a CronJob has no pods of its own) whose strategy
// (annotation, policies, flag) is evict, not in dry-run.
func (w *gathered) evicts() bool {
	if k, ok := workload.ByName(w.key.Kind); !ok || !k.Evictable {
		return false
	}
	_, ok := w.strategy.(restart.Evict)
	return ok && w.dry == nil
}

// of tells whether w was gathered from this version of obj.
func (w *gathered) of(obj client.Object) bool {
	return w.uid == obj.GetUID() && w.version == obj.GetResourceVersion()
}

// report reports what gather found malformed, once.
func (w *gathered) report(ctx context.Context) {
	for _, f := range w.findings {
		f(ctx)
	}
	w.findings = nil
}

// gather reads everything the walk of the workload key (obj) needs from
// the workload and the store: its references, the policies that apply
// to it, its dry-run memory, its restart and update strategies, and the
// input of plan.Decide. Malformed annotations and records are read as
// absent, so they never stop the workload from being handled, and kept
// to be reported (report) when a decision made from them is applied.
func (r *Reconciler) gather(ctx context.Context, key workload.Key, obj client.Object) (*gathered, error) {
	w, err := r.facts(key, obj)
	if err != nil {
		return nil, err
	}
	if err := r.input(ctx, w); err != nil {
		return nil, err
	}
	return w, nil
}

// facts gathers what the walk of key (obj) needs besides the decision's
// input: its references, the policies that apply to it (the one policy
// lookup of a walk), its dry-run memory and its strategies.
func (r *Reconciler) facts(key workload.Key, obj client.Object) (*gathered, error) {
	uses, err := r.resolve.Resolve(obj, r.Store)
	if err != nil {
		return nil, err
	}
	applied, err := r.applied(obj, uses)
	if err != nil {
		return nil, err
	}
	w := &gathered{key: key, obj: obj, uid: obj.GetUID(), version: obj.GetResourceVersion(),
		applied: applied, dry: r.dryFor(obj, applied), onDelete: workload.OnDelete(obj)}
	w.strategy, w.badStrategy = r.strategyOf(obj, applied) // strategy.go
	w.in = gather.Input(r.gatherOptions(), obj, uses, applied.Named)
	return w, nil
}

// input completes w.in: the record, the state of each object it uses, the
// SecretProviderClasses its pods mount.
func (r *Reconciler) input(ctx context.Context, w *gathered) error {
	obj, in := w.obj, &w.in
	w.findings = append(w.findings, func(ctx context.Context) { r.checkAnnotations(ctx, obj) })
	rec := gather.Record(obj.GetAnnotations(), r.Config.Hasher.ID())
	switch rec.State {
	case gather.RecordUnreadable:
		w.findings = append(w.findings, func(ctx context.Context) {
			ctrl.LoggerFrom(ctx).Error(rec.Err, "Ignoring unreadable record; adopting the workload as new")
			metrics.Errors.WithLabelValues("record").Inc()
		})
	case gather.RecordOtherKey:
		// Another replica may already have the installation's new key:
		// adopting its record would lose the change it stands for.
		if err := r.Config.Key.Verify(ctx); err != nil {
			return err
		}
		w.findings = append(w.findings, func(ctx context.Context) {
			ctrl.LoggerFrom(ctx).Info("Record made with another hash key; adopting the workload as new")
		})
	}
	in.Recorded, in.Version = rec.Record, rec.Version
	if w.dryRecord, w.dryKnown = w.dry.Record(obj); w.dryKnown {
		in.Recorded, in.Version = w.dryRecord, "" // what watcher would have written
	}
	for _, ref := range in.Refs {
		cfg, err := r.config(ref, obj.GetNamespace(), w)
		if err != nil {
			return err
		}
		in.Configs[ref.ID()] = cfg
	}
	if r.mounts != nil {
		w.mounted = r.mounts.Mounted(w.key) // before mounted reads it: current then errs on the side of gathering again
	}
	r.mounted(obj, in)
	return nil
}

// gatherOptions are the settings every input is built with.
func (r *Reconciler) gatherOptions() gather.Options {
	return gather.Options{Rules: r.rules, RestartOnCreate: r.Config.RestartOnCreate, ReloadOnDelete: r.Config.ReloadOnDelete}
}

// current tells whether w, gathered a moment ago, still holds for cached,
// the workload as the store holds it now: the same version of the
// workload, of every object it uses, of its dry-run memory and of the
// SecretProviderClasses its pods mount. Every event that changes the
// policies that apply to it, or its references, enqueues it again.
func (r *Reconciler) current(w *gathered, cached client.Object) bool {
	if !w.of(cached) {
		return false
	}
	for _, ref := range w.in.Refs {
		if ref.Kind != refs.ConfigMap && ref.Kind != refs.Secret {
			continue // SecretProviderClasses: compared below
		}
		cfg := w.in.Configs[ref.ID()]
		now, err := r.Store.Get(string(ref.Kind), w.key.Namespace, ref.Name)
		if err != nil || (now == nil) == cfg.Present || (now != nil && now.GetResourceVersion() != cfg.Version) {
			return false
		}
	}
	if rec, ok := w.dry.Record(w.obj); ok != w.dryKnown || rec.String() != w.dryRecord.String() {
		return false
	}
	return r.mounts == nil || reflect.DeepEqual(w.mounted, r.mounts.Mounted(w.key))
}

// config returns the current state of one referenced object from the
// store; its malformed annotations are kept in w's findings.
func (r *Reconciler) config(ref refs.Ref, namespace string, w *gathered) (plan.Config, error) {
	obj, err := r.Store.Get(string(ref.Kind), namespace, ref.Name)
	if err != nil || obj == nil {
		return plan.Config{}, err
	}
	d, err := hash.FromObject(obj)
	if err != nil {
		return plan.Config{}, err
	}
	w.findings = append(w.findings, func(ctx context.Context) { r.checkAnnotations(ctx, obj) })
	return configOf(obj, d), nil
}

// configOf returns the state of a ConfigMap or Secret that exists, with keys
// hashed, for plan.Decide and its rules.
func configOf(obj client.Object, d hash.Digest) plan.Config {
	return plan.Config{Present: true, Keys: d.Keys, Sum: d.Sum, Annotations: obj.GetAnnotations(), Labels: obj.GetLabels(), Version: obj.GetResourceVersion()}
}

// checkAnnotations reports malformed annotations on obj: the opt-out
// annotation and those of package optin, which the rules read as absent,
// and reload-list entries that are not regular expressions, which name
// nothing.
func (r *Reconciler) checkAnnotations(ctx context.Context, obj client.Object) {
	_, err := plan.OptedOut(obj.GetAnnotations(), r.Config.Annotation)
	if err = errors.Join(err, optin.Check(optin.Of(obj))); err != nil {
		r.invalidAnnotation(ctx, obj, err)
	}
}

// newConfig returns an empty ConfigMap or Secret.
func newConfig(kind refs.Kind) client.Object {
	if kind == refs.Secret {
		return &corev1.Secret{}
	}
	return &corev1.ConfigMap{}
}
