package app

import (
	"testing"

	"github.com/watcher-dev/watcher/internal/alert"
	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/hold"
	"github.com/watcher-dev/watcher/internal/object"
)

type alertsSeen []alert.Alert

func (r *alertsSeen) Notify(a alert.Alert) { *r = append(*r, a) }

// TestGuardAlerts: the guards' events reach the alert sender as alerts of
// their kind; with no sender the guards keep their own notifier.
func TestGuardAlerts(t *testing.T) {
	var got alertsSeen
	gc := withAlerts(hold.Config{}, &got)
	gc.Notifier.Notify(guard.Event{Type: guard.EventHeld, Workload: object.Ref{Kind: "Deployment", Namespace: "shop", Name: "web"}, Source: object.Ref{Kind: "Secret", Namespace: "shop", Name: "tls"}, Reason: guard.ReasonBudget, Message: "held"})
	gc.Notifier.Notify(guard.Event{Type: guard.EventFlapping, Source: object.Ref{Kind: "Secret", Namespace: "shop", Name: "tls"}, Message: "flapping"})
	if len(got) != 2 || got[0].Workload == nil || got[0].Workload.Name != "web" || got[0].Reason != string(guard.ReasonBudget) {
		t.Fatalf("alerts: %+v", got)
	}
	if gc := withAlerts(hold.Config{}, nil); gc.Notifier != nil {
		t.Errorf("no sender: notifier %T", gc.Notifier)
	}
}
