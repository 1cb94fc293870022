package announce

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"github.com/watcher-dev/watcher/internal/alert"
	"github.com/watcher-dev/watcher/internal/attribution"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/workload"
)

// noObjects is a store that holds nothing.
type noObjects struct{}

func (noObjects) Get(string, string, string) (*metav1.PartialObjectMetadata, error) { return nil, nil }

// alerts counts the alerts sent.
type alerts struct{ n int }

func (a *alerts) Notify(alert.Alert) { a.n++ }

// TestAnnounce: each kind of restart of the package comment's table gets
// its Event (its reason) and an alert only where the table says.
func TestAnnounce(t *testing.T) {
	key := workload.Key{Kind: workload.Deployment.Name(), Namespace: "shop", Name: "web"}
	changes := []plan.Change{{Ref: refs.Ref{Kind: refs.ConfigMap, Name: "cfg", AllKeys: true}, Keys: []string{"a"}}}
	tests := []struct {
		name      string
		onDelete  string
		dryRun    bool
		wantEvent string
		wantAlert int
	}{
		{"made", "", false, "Normal Restarted ", 1},
		{"made, OnDelete", "OnDelete", false, "Normal UpdatedOnDelete ", 0},
		{"would-be", "", true, "Normal WouldRestart ", 1},
		{"would-be, OnDelete", "OnDelete", true, "Normal WouldRestart ", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, sent := events.NewFakeRecorder(1), &alerts{}
			a := Announcer{Store: noObjects{}, ChangedBy: attribution.NewChangedBy(), Recorder: rec, Alerts: sent}
			said := a.Cause(key, changes)
			said.OnDelete, said.DryRun = tt.onDelete, tt.dryRun
			a.Announce(context.Background(), &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}, said, "id", "annotation")
			if got := <-rec.Events; !strings.HasPrefix(got, tt.wantEvent) || !strings.Contains(got, "ConfigMap cfg") {
				t.Errorf("event %q, want %q… naming ConfigMap cfg", got, tt.wantEvent)
			}
			if sent.n != tt.wantAlert {
				t.Errorf("%d alerts, want %d", sent.n, tt.wantAlert)
			}
		})
	}
}
