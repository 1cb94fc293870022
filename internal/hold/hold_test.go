package hold

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/workload"
)

// recording is a guard.Notifier that keeps what it is told.
type recording struct{ events []guard.Event }

func (r *recording) Notify(e guard.Event) { r.events = append(r.events, e) }

// TestHoldOncePerHold: a restart held again and again by the same gate
// gives one Event and one notification; its release one notification; a
// release by annotation lifts the budget; the gauge follows.
func TestHoldOncePerHold(t *testing.T) {
	now := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	rec := events.NewFakeRecorder(10)
	notes := &recording{}
	g := New(Config{Budget: 1, BudgetWindow: time.Hour, Notifier: notes, Now: func() time.Time { return now }}, nil, rec)
	key := workload.Key{Kind: "Deployment", Namespace: "shop", Name: "web"}
	obj := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	p := plan.Plan{Action: plan.Restart}
	ctx := context.Background()
	gauge := metrics.RestartsHeld.WithLabelValues("budget")
	before := testutil.ToFloat64(metrics.HeldRestarts.WithLabelValues("budget"))

	req, ok := admit(g, ctx, key, obj, p, func(error) {})
	if !ok {
		t.Fatal("first restart held")
	}
	g.Done(ctx, key, obj, req, nil)
	for i := range 3 {
		now = now.Add(time.Minute)
		if _, ok := admit(g, ctx, key, obj, p, func(error) {}); ok {
			t.Fatalf("restart %d within the budget admitted", i+2)
		}
	}
	if n := len(rec.Events); n != 1 {
		t.Fatalf("%d Events for one hold", n)
	}
	if e := <-rec.Events; !strings.Contains(e, "Warning RestartHeld Restart held (budget): restarted 1 times in the last 1h") {
		t.Errorf("Event %q", e)
	}
	if got := testutil.ToFloat64(metrics.HeldRestarts.WithLabelValues("budget")) - before; got != 1 {
		t.Errorf("watcher_held_restarts_total{reason=budget} grew by %v", got)
	}
	if testutil.ToFloat64(gauge) != 1 {
		t.Errorf("watcher_restarts_held{reason=budget} = %v", testutil.ToFloat64(gauge))
	}
	// A person sets the release annotation: the next decision restarts.
	obj.Annotations = map[string]string{guard.ReleaseAnnotation: "1"}
	req, ok = admit(g, ctx, key, obj, p, func(error) {})
	if !ok || !req.Released {
		t.Fatalf("released restart held: %+v", req)
	}
	g.Done(ctx, key, obj, req, nil)
	if testutil.ToFloat64(gauge) != 0 {
		t.Errorf("watcher_restarts_held{reason=budget} = %v after release", testutil.ToFloat64(gauge))
	}
	var types []guard.EventType
	for _, e := range notes.events {
		types = append(types, e.Type)
	}
	if len(types) != 2 || types[0] != guard.EventHeld || types[1] != guard.EventReleased {
		t.Errorf("notifications %v, want held, released", types)
	}
	// Nothing held: settling says nothing.
	g.Settled(ctx, key)
	if len(notes.events) != 2 {
		t.Errorf("settled notified: %v", notes.events)
	}
}

// TestNilGuardsAdmit: a Reconciler built without guards (tests) restarts.
func TestNilGuardsAdmit(t *testing.T) {
	var g *Guards
	if _, ok := g.Admit(context.Background(), workload.Key{}, &appsv1.Deployment{}, plan.Plan{Action: plan.Restart}, Facts{}, nil); !ok {
		t.Error("nil guards held")
	}
	g.Observe(context.Background(), workload.Key{}, nil, false)
	g.Settled(context.Background(), workload.Key{})
}
