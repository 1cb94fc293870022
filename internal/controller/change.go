package controller

import (
	"context"
	"errors"
	"slices"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watcher-dev/watcher/internal/hold"
	"github.com/watcher-dev/watcher/internal/lock"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/workload"
)

// processChange handles a changed ConfigMap or Secret on the replica that
// takes the lock of its current version: it reconciles every workload that
// uses the object and says what changed. If any of them fails, the lock is
// released without marking the version done, and the item is retried with
// backoff (one item, however often it fails).
func (r *Reconciler) processChange(ctx context.Context, req Change) (_ reconcile.Result, err error) {
	log := ctrl.LoggerFrom(ctx)
	meta := r.kinds.take(req)
	defer func() {
		if meta && err != nil { // retried: still of metadata only
			r.kinds.metadata(req)
		}
	}()
	switch in, wait := r.inScope(req.Namespace); {
	case wait:
		if meta { // looked at again later: still of metadata only
			r.kinds.metadata(req)
		}
		return reconcile.Result{RequeueAfter: namespaceWait}, nil
	case !in:
		// No lock taken, no user decided (namespaces.go). A lock kept
		// while the namespace was selected is released as done (take,
		// with an id no version has).
		r.changedBy.Forget(req.Ref)
		_, _, _ = r.pending.Take(req.Ref, "")
		log.V(1).Info("Changed in a namespace not selected; nothing to do")
		return reconcile.Result{}, nil
	}
	obj, err := r.Store.Get(req.Kind, req.Namespace, req.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	if obj == nil && !r.Config.ReloadOnDelete {
		log.V(1).Info("Changed, then deleted; nothing to do")
		return reconcile.Result{}, nil
	}
	// The lock names this version of this object (lock.ID). A deletion has
	// no version left: it is never marked done (see below), so that the
	// deletion of the object created again later is not taken for this one.
	id := lock.DeletedID(req.Kind, req.Namespace, req.Name, "")
	if obj != nil {
		id = lock.ID(req.Kind, obj)
	}
	held, outcome, err := r.pending.Take(req.Ref, id)
	// A change looked at again while its users are held was counted (as
	// a change, and for flapping) when it was first handled.
	recheck := held != nil
	if held == nil {
		held, outcome, err = r.Config.Locker.Acquire(ctx, id)
	}
	switch {
	case err != nil:
		metrics.LockAcquisitions.WithLabelValues("error").Inc()
		metrics.Errors.WithLabelValues("lock").Inc()
		log.Error(err, "Cannot take the lock of the change; retrying with backoff", "change", id)
		return reconcile.Result{}, err
	case outcome == lock.Done:
		metrics.LockAcquisitions.WithLabelValues("done").Inc()
		log.V(1).Info("Change processed by another replica", "change", id)
		return reconcile.Result{}, nil
	case outcome == lock.Held:
		metrics.LockAcquisitions.WithLabelValues("held").Inc()
		if meta { // looked at again later: still of metadata only
			r.kinds.metadata(req)
		}
		log.V(1).Info("Change locked by another replica; looking again later", "change", id)
		return reconcile.Result{RequeueAfter: r.Config.HeldRetry}, nil
	}
	metrics.LockAcquisitions.WithLabelValues("acquired").Inc()
	holding, err := r.changeUsers(ctrl.LoggerInto(ctx, log.WithValues("change", id)), req, meta || recheck)
	if err == nil && holding && obj != nil && r.pending != nil {
		// Some users' restarts are held (a wave, a budget, a window): the
		// change is not done until they are written. The lock is kept
		// (refreshed by the locker), so no other replica takes the change
		// while this one holds it; if this replica stops, the lock expires
		// and another replica takes the change and decides its users again
		// from the cluster, where their records are still behind.
		r.pending.Keep(req.Ref, id, held)
		log.V(1).Info("Change held for some users; keeping its lock", "change", id)
		return reconcile.Result{RequeueAfter: lock.PendingRecheck}, nil
	}
	r.pending.Drop(req.Ref)
	// Release even when ctx was cancelled (watcher is stopping): another
	// replica then takes the change at once rather than after the lock's
	// TTL. The locker bounds the call itself.
	// A deletion is released without its done marker: another replica
	// may handle it again, and finds its users up to date (processing is
	// level-triggered and idempotent).
	if err == nil {
		r.changedBy.Forget(req.Ref)
	}
	if rerr := held.Release(context.WithoutCancel(ctx), err == nil && obj != nil); rerr != nil {
		metrics.Errors.WithLabelValues("lock").Inc()
		log.Error(rerr, "Cannot release the lock of the change", "change", id)
	}
	return reconcile.Result{}, err
}

// changeUsers decides, from the store, for every workload that uses the
// object of req; says what changed and why the change restarts nothing where
// it does not; then reconciles the workloads that have something to do
// with what was gathered and decided for them (decided again only if the
// store changed since, and verified against the API server before a
// restart when it may lag).
//
// meta is true when only the object's labels or annotations changed: its
// users record it as it is now, and nothing is counted as a data change.
func (r *Reconciler) changeUsers(ctx context.Context, req Change, meta bool) (holding bool, _ error) {
	log := ctrl.LoggerFrom(ctx)
	users, err := r.Store.Users(refs.Kind(req.Kind), req.Namespace, req.Name)
	if err != nil {
		metrics.Errors.WithLabelValues("index").Inc()
		return false, err
	}
	if !meta {
		metrics.ConfigChanges.WithLabelValues(req.Kind).Inc()
		if len(users) > 0 {
			// Counted for flapping once per handled change, and only for
			// objects that workloads use.
			if cur, err := r.Store.Get(req.Kind, req.Namespace, req.Name); err == nil && cur != nil {
				r.guards.Handled(ctx, req.Ref, cur)
			}
		}
	}
	id := refs.Ref{Kind: refs.Kind(req.Kind), Name: req.Name}.ID()
	var errs []error
	var keys []string
	var act []workload.Key
	known := map[workload.Key]*triaged{}
	ignoredBy := "" // the rule that ignored the change, for some user
	if err := r.Config.Key.Current(); err != nil {
		return false, err
	}
	for _, u := range users {
		key := workload.Key{Kind: u.Kind, Namespace: u.Obj.Namespace, Name: u.Obj.Name}
		// Decided quietly: what is malformed is reported once, when the
		// decision is applied below.
		w, err := r.gather(ctrl.LoggerInto(ctx, log.WithValues("workload", key.String())), key, u.Obj)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		in := w.in
		p := decide(in)
		keys = append(keys, changedKeys(p, id)...)
		ignoredHere := "" // counted once per change, below
		if i := slices.IndexFunc(p.Ignored, func(c plan.Change) bool { return c.Ref.ID() == id }); i >= 0 {
			_, ignoredHere = in.Rules.Evaluate(in, p.Ignored[i].Ref)
			ignoredBy = ignoredHere
		}
		if reason := p.SkipReason(in); reason != "" && reason != ignoredHere {
			metrics.Skipped.WithLabelValues(reason).Inc()
			log.V(1).Info("Change restarts nothing for this workload", "object", req.String(), "workload", key.String(), "reason", reason)
		}
		if p.Action != plan.None || len(p.Missing) > 0 {
			act = append(act, key)
			known[key] = &triaged{w: w, p: p}
		} else {
			// Nothing left to restart (a change reverted): no policy lists
			// it as pending.
			r.decidedForPolicies(w, p)
		}
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	if len(keys) > 0 {
		by := r.announcer().Writers(req.Namespace, refs.Ref{Kind: refs.Kind(req.Kind), Name: req.Name})
		log.Info("Changed", "object", req.String(), "keys", keys, "changedBy", by)
	} else {
		log.V(1).Info("Changed; no workload reads a changed key", "object", req.String(), "users", len(users), "metadataOnly", meta)
	}
	if ignoredBy != "" {
		metrics.Skipped.WithLabelValues(ignoredBy).Inc()
		log.Info("Change restarts nothing: the object opted out", "object", req.String(), "reason", ignoredBy)
	}
	for _, key := range hold.InWaveOrder(act, r.cached) {
		_, _, err := r.walk(ctrl.LoggerInto(ctx, log.WithValues("workload", key.String())), key, known[key])
		// A workload that can never be written was reported; it must not
		// stop the change from being retried for the others.
		if err != nil && !errors.Is(err, reconcile.TerminalError(nil)) {
			errs = append(errs, err)
		}
		holding = holding || r.guards.Holding(key)
	}
	return holding, errors.Join(errs...)
}

// changedKeys returns the keys of the object id that p found changed,
// whether they restarted the workload or were ignored.
func changedKeys(p plan.Plan, id string) []string {
	var out []string
	for _, cs := range [][]plan.Change{p.Changes, p.Ignored} {
		for _, c := range cs {
			if c.Ref.ID() == id {
				out = append(out, c.Keys...)
			}
		}
	}
	return out
}
