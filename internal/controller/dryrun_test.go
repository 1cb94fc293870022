package controller

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/store"
	"github.com/watcher-dev/watcher/internal/workload"
)

// TestDryApply: in dry-run, each decision is kept in memory (the next
// decision compares with it), only a restart is announced (Event
// WouldRestart, watcher_would_restart_total), a workload whose pods roll
// only when deleted is announced but not counted as a restart, and nothing
// is written: the Reconciler has no client to write with.
func TestDryApply(t *testing.T) {
	rec := plan.Record{"ConfigMap/cfg": {All: true, Keys: map[string]string{"a": "2"}}}
	change := []plan.Change{{Ref: refs.Ref{Kind: refs.ConfigMap, Name: "cfg", AllKeys: true}, Keys: []string{"a"}, Old: "11111111", New: "22222222"}}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db"},
		Spec: appsv1.StatefulSetSpec{UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}}}
	tests := []struct {
		name       string
		obj        client.Object
		p          plan.Plan
		wantRecord plan.Record
		wantEvent  string
		wantCount  float64
	}{
		{"adopt: kept, not announced", dep, plan.Plan{Action: plan.Adopt, Record: rec}, rec, "", 0},
		{"refresh: kept, not announced", dep, plan.Plan{Action: plan.Refresh, Record: rec}, rec, "", 0},
		{"forget: no record kept", dep, plan.Plan{Action: plan.Forget}, nil, "", 0},
		{"restart: kept, announced and counted", dep, plan.Plan{Action: plan.Restart, Record: rec, Changes: change},
			rec, "Normal WouldRestart Dry run, nothing written: would restart because ConfigMap cfg changed (keys: a; 11111111→22222222)", 1},
		{"restart on delete: announced, not counted", sts, plan.Plan{Action: plan.Restart, Record: rec, Changes: change},
			rec, "Normal WouldRestart Dry run, nothing written: would update the template (pods pick up the change only when deleted, OnDelete) because ConfigMap cfg changed", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rcd := events.NewFakeRecorder(10)
			st, err := store.New(kubefake.NewClientset(), store.Options{Hasher: hash.NewHasher([]byte("0123456789abcdef0123"))})
			if err != nil {
				t.Fatal(err)
			}
			r := New(st, nil, nil, rcd, Config{DryRun: true})
			kind, _ := workload.Of(tt.obj)
			key := workload.Key{Kind: kind.Name(), Namespace: "shop", Name: tt.obj.GetName()}
			counter := metrics.WouldRestart.WithLabelValues(key.Kind)
			before := testutil.ToFloat64(counter)
			r.dryApply(context.Background(), r.dry, key, tt.obj, tt.p)
			got, ok := r.dry.Record(tt.obj)
			if !ok || !equalRecords(got, tt.wantRecord) {
				t.Errorf("record in memory = %v, %v; want %v", got, ok, tt.wantRecord)
			}
			var event string
			select {
			case event = <-rcd.Events:
			default:
			}
			if !strings.HasPrefix(event, tt.wantEvent) || (tt.wantEvent == "") != (event == "") {
				t.Errorf("event %q, want %q", event, tt.wantEvent)
			}
			if d := testutil.ToFloat64(counter) - before; d != tt.wantCount {
				t.Errorf("watcher_would_restart_total grew by %v, want %v", d, tt.wantCount)
			}
			r.dry.Drop(key)
			if _, ok := r.dry.Record(tt.obj); ok {
				t.Error("a deleted workload's record is kept")
			}
		})
	}
}

func equalRecords(a, b plan.Record) bool { return a.String() == b.String() && (a == nil) == (b == nil) }
