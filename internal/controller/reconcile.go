package controller

import (
	"context"
	"errors"

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
	"github.com/watcher-dev/watcher/internal/dryrun"
	"github.com/watcher-dev/watcher/internal/evict"
	"github.com/watcher-dev/watcher/internal/hold"
	"github.com/watcher-dev/watcher/internal/lock"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/note"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/producer"
	"github.com/watcher-dev/watcher/internal/resolve"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/selection"
	"github.com/watcher-dev/watcher/internal/snapshot"
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
	dry *dryrun.Memory
	// policyDry holds the same for the workloads a dry-run ReloadPolicy
	// applies to (see dryFor).
	policyDry *dryrun.Memory
	// kinds tells metadata-only changes from data changes (handler.go).
	kinds *changeKinds
	// guards hold restarts that would be a storm (see package hold).
	guards *hold.Guards
	// pending keeps the locks of changes whose users are held.
	pending *lock.Pending
	// cronJobs runs restarted CronJobs at once; nil when the trigger is
	// off.
	cronJobs *trigger.Trigger
	// evictions carries on the restarts by eviction (evict.go), at the
	// looks evictLoop schedules.
	evictions *evict.Progress
	evictLoop evict.Loop[Request]
	// releases are the template changes seen as written (a release's own
	// rollout: verdict.Facts.Released).
	releases workload.Releases
	// producerWakes adds the workloads whose sources' producers made
	// progress (producers.go).
	producerWakes producer.Wakes[Request]
	// selection follows the namespaces selected, with a namespace
	// selector; nil without (namespaces.go).
	selection *selection.Namespaces
	// mounts knows the SecretProviderClasses workloads' pods mount; nil
	// when CSI is off (mounted.go).
	mounts *csi.Watcher
	// pinner completes the pin facts and writes pins and rollbacks
	// (package snapshot); a nil Maker in it: pinning is off.
	pinner *snapshot.Pinner
	// stale follows the workloads whose restart is due but not made
	// (stale.go).
	stale staleSet
	// rotated carries the workloads whose mounted versions changed, from
	// mounts to the work queue; nil when CSI is off.
	rotated chan event.TypedGenericEvent[object.Ref]
	// recreations re-creates Jobs; nil when Jobs are not watched (job.go).
	recreations *restart.Recreator
}

// Reconcile processes one request: a changed object, a workload, or the
// next look at a workload's restart by eviction.
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
		_, w, err := r.walk(ctx, req.Ref, nil)
		if err != nil {
			return reconcile.Result{}, err
		}
		// The next look at a restart by eviction is an Eviction: the walk
		// is not run again for it.
		after, err := r.evictStep(ctx, req.Ref, w, false)
		r.evictLoop.Schedule(Eviction(req), after)
		return reconcile.Result{}, err
	case Eviction:
		in, wait := r.inScope(req.Namespace)
		if wait {
			return reconcile.Result{RequeueAfter: namespaceWait}, nil
		}
		if !in {
			return reconcile.Result{}, nil
		}
		after, err := r.evictStep(ctx, req.Ref, nil, true)
		return reconcile.Result{RequeueAfter: after}, err
	}
	return reconcile.Result{}, nil
}

// conflictRetries is how many times a workload is read again and decided
// again after a write conflict before the work queue's backoff takes over.
// During a rollout the workload's controller writes its status often, and
// each write moves the resourceVersion the patch is conditioned on.
const conflictRetries = 5

// reconcileWorkload gathers, plans and applies for one workload (walk),
// and returns the plan applied, for the caller's reports.
func (r *Reconciler) reconcileWorkload(ctx context.Context, key workload.Key) (plan.Plan, error) {
	p, _, err := r.walk(ctx, key, nil)
	return p, err
}

// walk gathers, plans and applies for one workload. A write conflict means
// someone else (another replica, a user, the workload's controller)
// changed the workload since it was read: read it again from the API
// server and decide again.
//
// known, when set, is what the triage of a change (changeUsers) gathered
// and decided for the workload: it is used again, not asked again, unless
// something it was made from changed since (current). walk returns the
// plan applied, for the caller's reports, and what it gathered of the
// workload as the store holds it (nil when nothing: out of scope, gone),
// for the eviction step.
func (r *Reconciler) walk(ctx context.Context, key workload.Key, known *triaged) (_ plan.Plan, _ *gathered, err error) {
	kind, ok := workload.ByName(key.Kind)
	if in, _ := r.inScope(key.Namespace); !ok || !in {
		return plan.Plan{}, nil, nil
	}
	since, adopt := r.selection.Take(key)
	defer func() {
		if adopt && err != nil { // retried: still to adopt
			r.selection.Readopt(key, since)
		}
	}()
	cached, err := r.Store.Get(key.Kind, key.Namespace, key.Name)
	if err != nil {
		return plan.Plan{}, nil, err
	}
	if cached == nil { // deleted
		r.stale.set(key, false)
		r.guards.Observe(ctx, key, nil, false)
		r.dry.Drop(key)
		r.policyDry.Drop(key)
		return plan.Plan{}, nil, nil
	}
	// The patch writes the server's answer into the object: not the store's.
	var w *gathered
	var gerr error
	if known != nil && r.current(known.w, cached) {
		w = known.w
		w.obj = cached.DeepCopy()
	} else {
		known = nil
		w, gerr = r.facts(key, cached.DeepCopy()) // the input: in reconcile
	}
	// The guards are told whether its rollout shows only in its pods
	// (evictStep tells them of it then).
	r.guards.Observe(ctx, key, cached, gerr == nil && w.evicts())
	if kind.Recreate && cached.GetDeletionTimestamp() != nil {
		return plan.Plan{}, w, nil // a Job being deleted is never restarted (job.go)
	}
	stored := w
	var out plan.Plan
	for attempt := 0; ; attempt++ {
		err = gerr
		if err == nil {
			out, err = r.reconcile(ctx, w, known, adoption{since, adopt})
		}
		if !apierrors.IsConflict(err) || attempt == conflictRetries {
			break
		}
		ctrl.LoggerFrom(ctx).V(1).Info("Write conflict; deciding again from a fresh read", "attempt", attempt+1)
		obj := kind.New()
		if err := r.Fresh.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: key.Name}, obj); err != nil {
			metrics.Errors.WithLabelValues("get").Inc()
			return plan.Plan{}, stored, client.IgnoreNotFound(err)
		}
		known = nil
		w, gerr = r.facts(key, obj)
	}
	if apierrors.IsNotFound(err) {
		return plan.Plan{}, stored, nil
	}
	if err != nil && !errors.Is(err, reconcile.TerminalError(nil)) {
		metrics.Errors.WithLabelValues("patch").Inc()
	}
	return out, stored, err
}

// adoption is a workload's adoption with its namespace: on, its namespace
// came to match at resourceVersion since (namespaces.go).
type adoption struct {
	since string
	on    bool
}

// decide is plan.Decide (a variable for the tests that count the
// decisions of one walk).
var decide = plan.Decide

// reconcile decides and applies for the workload w, its input completed
// first (input) unless known, the triage of a change, decided from w.
// adopt: its namespace was just selected, and what was written before
// restarts nothing (namespaces.go).
func (r *Reconciler) reconcile(ctx context.Context, w *gathered, known *triaged, adopt adoption) (plan.Plan, error) {
	if err := r.Config.Key.Current(); err != nil {
		return plan.Plan{}, err
	}
	var p plan.Plan
	w.restarted = false
	if known != nil {
		p = known.p
	} else {
		if err := r.input(ctx, w); err != nil { // gather.go
			return plan.Plan{}, err
		}
		p = decide(w.in)
	}
	w.report(ctx)
	if adopt.on && p.Action == plan.Restart {
		before := len(p.Changes)
		p = selection.Adopted(p, w.in.Configs, adopt.since)
		ctrl.LoggerFrom(ctx).Info("Namespace newly selected; recording changes made before without a restart",
			"changesBefore", before-len(p.Changes), "changesAfter", len(p.Changes))
	}
	if plan.StoreMayLag(w.in, p) {
		var err error
		if p, err = r.verify(ctx, w.obj.GetNamespace(), w.in, p); err != nil { // verify.go
			return plan.Plan{}, err
		}
	}
	out, done, err := r.afterDecision(ctx, w, p) // pin.go
	if err != nil || done {
		return out.Plan, err
	}
	p, w.outcome = out.Plan, out
	due := p.Action == plan.Restart || out.Stale
	obj, p, err := r.recreations.Facts(ctx, w.key, w.obj, w.in, p)
	if err != nil {
		return plan.Plan{}, err
	}
	if err := r.apply(ctx, w, obj, p); err != nil {
		return p, err
	}
	if p.Action == plan.Restart || !due {
		r.stale.set(w.key, p.Action == plan.Restart && !w.restarted)
	}
	r.decidedForPolicies(w, p)
	return p, nil
}

// invalidAnnotation reports malformed annotations on obj: in the log, the
// error metric and a Warning Event whose note is cut to the API's limit
// (errors of package optin quote list entries only cut short).
func (r *Reconciler) invalidAnnotation(ctx context.Context, obj client.Object, err error) {
	ctrl.LoggerFrom(ctx).Error(err, "Invalid annotation", "object", obj.GetNamespace()+"/"+obj.GetName())
	metrics.Errors.WithLabelValues("annotation").Inc()
	r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, "InvalidAnnotation", "Validate", "%s", note.Truncate(err.Error()))
}
