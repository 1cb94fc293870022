package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/watcher-dev/watcher/internal/attribution"
	"github.com/watcher-dev/watcher/internal/csi"
	"github.com/watcher-dev/watcher/internal/evict"
	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/hold"
	"github.com/watcher-dev/watcher/internal/lock"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/note"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/resolve"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/store"
	"github.com/watcher-dev/watcher/internal/trigger"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Reconciler brings one workload in line with the ConfigMaps and Secrets it
// uses.
type Reconciler struct {
	// Store holds the workloads and the digests of ConfigMaps and Secrets.
	Store *store.Store
	// Client writes patches.
	Client client.Client
	// Fresh reads from the API server: after a write conflict, and before
	// every restart.
	Fresh client.Reader
	// Recorder emits Events on restarted workloads.
	Recorder recorder.EventRecorder
	Config   Config
	resolve  *resolve.Resolver
	// rules say which references count (plan.Input.Rules).
	rules plan.Chain
	// changedBy says who made the changes not handled yet.
	changedBy *attribution.ChangedBy
	// dry holds, in dry-run mode, the records watcher would have written;
	// nil otherwise.
	dry *dryRun
	// policyDry holds the same for the workloads a dry-run ReloadPolicy
	// applies to (see dryFor).
	policyDry *dryRun
	// kinds tells metadata-only changes from data changes (handler.go).
	kinds *changeKinds
	// guards hold restarts that would be a storm (see package hold).
	guards *hold.Guards
	// pending keeps the locks of changes whose users are held.
	pending *lock.Pending
	// cronJobs runs restarted CronJobs at once; nil when the trigger is
	// off.
	cronJobs *trigger.Trigger
	// evicted remembers the progress of restarts by eviction (evict.go).
	evicted evict.Tracker
	// selection follows the namespaces selected, with a namespace
	// selector; nil without (namespaces.go).
	selection *selection
	// mounts knows the SecretProviderClasses workloads' pods mount; nil
	// when CSI is off (mounted.go).
	mounts *csi.Watcher
	// rotated carries the workloads whose mounted versions changed, from
	// mounts to the work queue; nil when CSI is off.
	rotated chan event.TypedGenericEvent[object.Ref]
	// recreations re-creates Jobs; nil when Jobs are not watched (job.go).
	recreations *restart.Recreator
}

// Reconcile processes one request: a changed object or a workload.
func (r *Reconciler) Reconcile(ctx context.Context, req Request) (reconcile.Result, error) {
	switch req := req.(type) {
	case Change:
		return r.processChange(ctx, req)
	case Workload:
		if _, wait := r.inScope(req.Namespace); wait {
			return reconcile.Result{RequeueAfter: namespaceWait}, nil
		}
		if res, ok, err := r.recreations.Handle(ctx, req.Ref, r.cached); ok {
			return res, err
		}
		if _, err := r.reconcileWorkload(ctx, req.Ref); err != nil {
			return reconcile.Result{}, err
		}
		return r.evictStep(ctx, req.Ref)
	}
	return reconcile.Result{}, nil
}

// conflictRetries is how many times a workload is read again and decided
// again after a write conflict before the work queue's backoff takes over.
// During a rollout the workload's controller writes its status often, and
// each write moves the resourceVersion the patch is conditioned on.
const conflictRetries = 5

// reconcileWorkload gathers, plans and applies for one workload. A write
// conflict means someone else (another replica, a user, the workload's
// controller) changed the workload since it was read: read it again from the
// API server and decide again.
//
// It returns the plan applied, for the caller's reports.
func (r *Reconciler) reconcileWorkload(ctx context.Context, key workload.Key) (_ plan.Plan, err error) {
	kind, ok := workload.ByName(key.Kind)
	if in, _ := r.inScope(key.Namespace); !ok || !in {
		return plan.Plan{}, nil
	}
	since, adopt := r.selection.take(key)
	defer func() {
		if adopt && err != nil { // retried: still to adopt
			r.selection.readopt(key, since)
		}
	}()
	cached, err := r.Store.Get(key.Kind, key.Namespace, key.Name)
	if err == nil {
		r.guards.Observe(ctx, key, cached)
	}
	if cached == nil && err == nil {
		r.dry.drop(key) // deleted
		r.policyDry.drop(key)
	}
	if err != nil || cached == nil {
		return plan.Plan{}, err
	}
	if kind.Recreate && cached.GetDeletionTimestamp() != nil {
		return plan.Plan{}, nil // a Job being deleted is never restarted (job.go)
	}
	// The patch writes the server's answer into the object: not the store's.
	var obj client.Object = cached.DeepCopy()
	var out plan.Plan
	for attempt := 0; ; attempt++ {
		out, err = r.reconcile(ctx, key, obj, adoption{since, adopt})
		if !apierrors.IsConflict(err) || attempt == conflictRetries {
			break
		}
		ctrl.LoggerFrom(ctx).V(1).Info("Write conflict; deciding again from a fresh read", "attempt", attempt+1)
		obj = kind.New()
		if err := r.Fresh.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: key.Name}, obj); err != nil {
			metrics.Errors.WithLabelValues("get").Inc()
			return plan.Plan{}, client.IgnoreNotFound(err)
		}
	}
	if apierrors.IsNotFound(err) {
		return plan.Plan{}, nil
	}
	if err != nil && !errors.Is(err, reconcile.TerminalError(nil)) {
		metrics.Errors.WithLabelValues("patch").Inc()
	}
	return out, err
}

// adoption is a workload's adoption with its namespace: on, its namespace
// came to match at resourceVersion since (namespaces.go).
type adoption struct {
	since string
	on    bool
}

// reconcile decides and applies for obj; adopt: its namespace was just
// selected, and what was written before restarts nothing (namespaces.go).
func (r *Reconciler) reconcile(ctx context.Context, key workload.Key, obj client.Object, adopt adoption) (plan.Plan, error) {
	if err := r.Config.Key.Current(); err != nil {
		return plan.Plan{}, err
	}
	in, err := r.gather(ctx, obj, true)
	if err != nil {
		return plan.Plan{}, err
	}
	p := plan.Decide(in)
	if adopt.on && p.Action == plan.Restart {
		before := len(p.Changes)
		p = adopted(p, in.Configs, adopt.since)
		ctrl.LoggerFrom(ctx).Info("Namespace newly selected; recording changes made before without a restart",
			"changesBefore", before-len(p.Changes), "changesAfter", len(p.Changes))
	}
	if plan.StoreMayLag(in, p) {
		if p, err = r.verify(ctx, obj.GetNamespace(), in, p); err != nil {
			return plan.Plan{}, err
		}
	}
	if obj, p, err = r.recreations.Facts(ctx, key, obj, in, p); err != nil {
		return plan.Plan{}, err
	}
	if err := r.apply(ctx, key, obj, in, p); err != nil {
		return p, err
	}
	r.decidedForPolicies(obj, in.Refs, key, p)
	return p, nil
}

// verify decides a restart again with the changed objects read from the API
// server. The record on a workload may have been written by a replica that
// saw a newer ConfigMap than this replica's store holds: another active
// replica in the redis and none modes, the previous leader at a lease
// handover. Restarting from the store would roll the workload back to older
// content, then forward again. It is called only when the record's version
// does not show the store to be at least as new (plan.StoreMayLag): in the
// usual case, a change seen after the record was written, the restart
// costs the patch alone.
func (r *Reconciler) verify(ctx context.Context, namespace string, in plan.Input, p plan.Plan) (plan.Plan, error) {
	for _, c := range p.Changes {
		if c.Ref.Kind != refs.ConfigMap && c.Ref.Kind != refs.Secret {
			continue // a SecretProviderClass: no object to read again
		}
		obj := newConfig(c.Ref.Kind)
		err := r.Fresh.Get(ctx, types.NamespacedName{Namespace: namespace, Name: c.Ref.Name}, obj)
		if err != nil && !apierrors.IsNotFound(err) {
			metrics.Errors.WithLabelValues("get").Inc()
			return p, fmt.Errorf("get %s %s/%s: %w", strings.ToLower(string(c.Ref.Kind)), namespace, c.Ref.Name, err)
		}
		cfg := plan.Config{}
		if err == nil {
			d, err := r.Config.Hasher.OfObject(obj)
			if err != nil {
				return p, err
			}
			cfg = r.configOf(ctx, obj, d.Keys, true)
		}
		in.Configs[c.Ref.ID()] = cfg
	}
	return plan.Decide(in), nil
}

// gather reads everything plan.Decide needs from the workload and the store.
// Malformed annotations and records are read as absent, so they never stop
// the workload from being handled, and reported when report is true: once
// per decision that is applied, not again for a decision made only to
// triage a change (see changeUsers).
func (r *Reconciler) gather(ctx context.Context, obj client.Object, report bool) (plan.Input, error) {
	log := ctrl.LoggerFrom(ctx)
	uses, err := r.resolve.Resolve(obj, r.Store)
	if err != nil {
		return plan.Input{}, err
	}
	applied, err := r.applied(obj, uses)
	if err != nil {
		return plan.Input{}, err
	}
	in := plan.Input{
		Rules:           r.rules,
		Annotations:     optin.Of(obj),
		OptInOnly:       kindOf(obj).Recreate,
		Controlled:      kindOf(obj).Controlled(obj),
		Policies:        applied.Named,
		Refs:            uses,
		Configs:         map[string]plan.Config{},
		RestartOnCreate: r.Config.RestartOnCreate,
		ReloadOnDelete:  r.Config.ReloadOnDelete,
	}
	if report {
		r.checkAnnotations(ctx, obj)
	}
	if s, ok := obj.GetAnnotations()[plan.RecordAnnotation]; ok {
		switch in.Recorded, err = plan.ParseRecord(s); {
		case err != nil:
			if report {
				log.Error(err, "Ignoring unreadable record; adopting the workload as new")
				metrics.Errors.WithLabelValues("record").Inc()
			}
		case obj.GetAnnotations()[plan.HashKeyAnnotation] != r.Config.Hasher.ID():
			// Another replica may already have the installation's new key:
			// adopting its record would lose the change it stands for.
			if err := r.Config.Key.Verify(ctx); err != nil {
				return plan.Input{}, err
			}
			if report {
				log.Info("Record made with another hash key; adopting the workload as new")
			}
			in.Recorded = nil
		}
		in.Version = plan.ParseVersion(obj.GetAnnotations()[plan.VersionAnnotation], in.Recorded)
	}
	if rec, ok := r.dryFor(obj, applied).record(obj); ok {
		in.Recorded, in.Version = rec, "" // what watcher would have written
	}
	for _, ref := range in.Refs {
		cfg, err := r.config(ctx, obj.GetNamespace(), ref, report)
		if err != nil {
			return plan.Input{}, err
		}
		in.Configs[ref.ID()] = cfg
	}
	r.mounted(obj, &in)
	return in, nil
}

// config returns the current state of one referenced object from the store.
func (r *Reconciler) config(ctx context.Context, namespace string, ref refs.Ref, report bool) (plan.Config, error) {
	obj, err := r.Store.Get(string(ref.Kind), namespace, ref.Name)
	if err != nil || obj == nil {
		return plan.Config{}, err
	}
	d, err := hash.FromObject(obj)
	if err != nil {
		return plan.Config{}, err
	}
	return r.configOf(ctx, obj, d.Keys, report), nil
}

// configOf returns the state of a ConfigMap or Secret that exists, with keys
// hashed, for plan.Decide and its rules, reporting its malformed annotations
// if report is true.
func (r *Reconciler) configOf(ctx context.Context, obj client.Object, keys map[string]string, report bool) plan.Config {
	if report {
		r.checkAnnotations(ctx, obj)
	}
	return plan.Config{Present: true, Keys: keys, Annotations: obj.GetAnnotations(), Labels: obj.GetLabels(), Version: obj.GetResourceVersion()}
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

// invalidAnnotation reports malformed annotations on obj: in the log, the
// error metric and a Warning Event whose note is cut to the API's limit
// (errors of package optin quote list entries only cut short).
func (r *Reconciler) invalidAnnotation(ctx context.Context, obj client.Object, err error) {
	ctrl.LoggerFrom(ctx).Error(err, "Invalid annotation", "object", obj.GetNamespace()+"/"+obj.GetName())
	metrics.Errors.WithLabelValues("annotation").Inc()
	r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, "InvalidAnnotation", "Validate", "%s", note.Truncate(err.Error()))
}
