package controller

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/selection"
	"github.com/watcher-dev/watcher/internal/workload"
)

// TestAdoptionByVersion: a workload marked for adoption when its namespace
// came to match (on a standby, maybe days before it leads) restarts for a
// change of its ConfigMap written after the match (the ConfigMap's
// resourceVersion, 5, newer than the namespace's at the match), and only
// records one written before; either way its record is brought up to date.
func TestAdoptionByVersion(t *testing.T) {
	for _, tt := range []struct {
		since     string
		restarted bool
	}{
		{since: "4", restarted: true},
		{since: "5", restarted: false},
		{since: "6", restarted: false},
		{since: "", restarted: false}, // no version of the match: as before, adopted
	} {
		t.Run("since "+tt.since, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r, _, apiServer, _ := verifyCase{recorded: "v1", stored: "v2", server: "v2", recordedAt: "3"}.setUp(t, ctx)
			key := workload.Key{Kind: "Deployment", Namespace: "ns", Name: "web"}
			r.selection = selection.New()
			r.selection.Selected("ns", tt.since, []workload.Key{key})
			out, err := r.reconcileWorkload(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			var got appsv1.Deployment
			if err := apiServer.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "web"}, &got); err != nil {
				t.Fatal(err)
			}
			_, restarted := got.Spec.Template.Annotations[plan.RestartAnnotation]
			if restarted != tt.restarted {
				t.Errorf("restarted %v (plan %s), want %v", restarted, out.Action, tt.restarted)
			}
			if got.Annotations[plan.RecordAnnotation] != out.Record.String() || out.Record == nil {
				t.Error("the record was not brought up to date")
			}
			if _, again := r.selection.Take(key); again {
				t.Error("the adoption mark was not taken")
			}
		})
	}
}
