package controller

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/hold"
	"github.com/watcher-dev/watcher/internal/lock"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/policy"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/resolve"
)

// TestOneWalkPerChange: the change of a ConfigMap that restarts one
// Deployment asks the ReloadPolicies that apply to it once, and decides
// once, from what the change's triage gathered; twice when the store may
// lag behind the record (plan.StoreMayLag), the second time with the
// changed ConfigMap read from the API server.
func TestOneWalkPerChange(t *testing.T) {
	tests := []struct {
		name            string
		c               verifyCase
		lookups, decide int
	}{
		{"the store newer than the record", verifyCase{recorded: "v1", stored: "v2", server: "v2", recordedAt: "3"}, 1, 1},
		{"the store may lag (no version recorded)", verifyCase{recorded: "v1", stored: "v2", server: "v2"}, 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r, st, apiServer, _ := tt.c.setUp(t, ctx)
			r.Config.Locker = lock.Local{}
			r.Config.Policies = &Policies{Index: policy.NewIndex()}
			r.guards = hold.New(r.Config.Guards, st, r.Recorder)
			lookups, decisions := countWalk(t)

			req := Change{object.Ref{Kind: string(refs.ConfigMap), Namespace: "ns", Name: "cfg"}}
			if _, err := r.Reconcile(ctx, req); err != nil {
				t.Fatal(err)
			}
			var got appsv1.Deployment
			if err := apiServer.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "web"}, &got); err != nil {
				t.Fatal(err)
			}
			if _, restarted := got.Spec.Template.Annotations[plan.RestartAnnotation]; !restarted {
				t.Fatal("not restarted")
			}
			if *lookups != tt.lookups || *decisions != tt.decide {
				t.Errorf("policy lookups %d, decisions %d; want %d and %d", *lookups, *decisions, tt.lookups, tt.decide)
			}
		})
	}
}

// countWalk counts the policy lookups and the decisions until the test
// ends.
func countWalk(t *testing.T) (lookups, decisions *int) {
	lookups, decisions = new(int), new(int)
	lookup, dec := policiesFor, decide
	t.Cleanup(func() { policiesFor, decide = lookup, dec })
	policiesFor = func(ix *policy.Index, obj client.Object, uses []refs.Ref, configs resolve.Configs) (policy.Applied, error) {
		*lookups++
		return lookup(ix, obj, uses, configs)
	}
	decide = func(in plan.Input) plan.Plan {
		*decisions++
		return dec(in)
	}
	return lookups, decisions
}
