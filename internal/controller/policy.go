package controller

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/watcher-dev/watcher/internal/dryrun"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/policy"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Policies is what the controller needs of package policy; a nil
// *Policies, or one with nil fields, means no policy ever applies.
type Policies struct {
	// Index holds the policies (the resolver's policy.References reads
	// the same).
	Index *policy.Index
	// Watcher keeps Index in line with the cluster, re-indexing the
	// workloads a policy change concerns; the controller reconciles them.
	Watcher *policy.Watcher
	// Status writes the policies' status; the controller tells it what it
	// did for their workloads.
	Status *policy.StatusWriter
}

// policySource is the controller's source of policy changes: it hands the
// workloads each change concerns to the work queue, and the policy to the
// status writer. The controller starts no worker before the policies are
// known (or known to be off): a workload decided without its policies
// could be adopted without the references they add.
type policySource struct {
	p *Policies
}

var _ source.TypedSyncingSource[Request] = policySource{}

// Start implements source.TypedSource.
func (s policySource) Start(_ context.Context, q workqueue.TypedRateLimitingInterface[Request]) error {
	s.p.Watcher.OnChange(func(name string, keys []workload.Key) {
		for _, k := range keys {
			q.Add(Workload{k})
		}
		if s.p.Status != nil && name != "" {
			s.p.Status.Enqueue(name)
		}
	})
	// The policies indexed before the controller started (a standby that
	// takes the lease over, or an initial list applied first) were handed
	// to no one: their status is looked at now.
	if s.p.Status != nil && s.p.Index != nil {
		for _, name := range s.p.Index.Keys() {
			s.p.Status.Enqueue(name)
		}
	}
	return nil
}

// WaitForSync implements source.TypedSyncingSource.
func (s policySource) WaitForSync(ctx context.Context) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for !s.p.Watcher.Synced() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("ReloadPolicies not synced: %w", ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// applied returns what the policies that apply to obj, a workload whose
// references are uses, say: the policy lookup, once per walk (gather).
func (r *Reconciler) applied(obj client.Object, uses []refs.Ref) (policy.Applied, error) {
	if r.Config.Policies == nil || r.Config.Policies.Index == nil {
		return policy.Applied{}, nil
	}
	return policiesFor(r.Config.Policies.Index, obj, uses, r.Store)
}

// policiesFor is policy.Index.For (a variable for the tests that count the
// policy lookups of one walk).
var policiesFor = (*policy.Index).For

// dryFor returns the dry-run memory obj is decided with: --dry-run's for
// every workload; else, for a workload a dry-run ReloadPolicy applies to
// (a), the policies'; nil for the others, whose records are then read and
// written as usual again (a policy's dryRun turned off forgets the
// workload's memory).
func (r *Reconciler) dryFor(obj client.Object, a policy.Applied) *dryrun.Memory {
	switch {
	case r.dry != nil:
		return r.dry
	case a.DryRun:
		return r.policyDry
	}
	if r.policyDry != nil {
		if k, ok := workload.Of(obj); ok {
			r.policyDry.Drop(workload.Key{Kind: k.Name(), Namespace: obj.GetNamespace(), Name: obj.GetName()})
		}
	}
	return nil
}

// restartedForPolicies tells the status writer that the workload key was
// restarted for the changes of p.
func (r *Reconciler) restartedForPolicies(a policy.Applied, key workload.Key, p plan.Plan) {
	if r.Config.Policies == nil || r.Config.Policies.Status == nil || len(a.Policies) == 0 {
		return
	}
	ids := make([]string, 0, len(p.Changes))
	for _, c := range p.Changes {
		ids = append(ids, c.Ref.ID())
	}
	if ps := a.Naming(ids); len(ps) > 0 {
		r.Config.Policies.Status.Restarted(ps, key, time.Now(), ids)
	}
}

// decidedForPolicies tells the status writer that the workload w was
// decided (p) and the decision carried out: with no restart left to
// write, the policies no longer list it as pending (its change was
// reverted, or the restart written); with its record changed, policies
// waiting for a missing source or target look again.
func (r *Reconciler) decidedForPolicies(w *gathered, p plan.Plan) {
	if r.Config.Policies == nil || r.Config.Policies.Status == nil || len(w.applied.Policies) == 0 {
		return
	}
	r.Config.Policies.Status.Decided(w.applied.Policies, w.key, p.Action == plan.Restart, p.Action != plan.None)
}

// coalesce returns how long the changes of obj, a ConfigMap or Secret of
// kind, are held for the policies that name it.
func (p *Policies) coalesce(kind refs.Kind, obj client.Object) time.Duration {
	if p == nil || p.Index == nil {
		return 0
	}
	return p.Index.Coalesce(kind, obj)
}
