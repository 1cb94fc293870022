package alert_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/watcher-dev/watcher/internal/alert"
)

// TestSenderFailedRolloutNeverCrowdedOut: a flood of held and flapping
// alerts, from one namespace or from 200, while the worker cannot send yet
// (no URL), then one failed rollout: the failed rollout is queued and sent
// first; one namespace's flood is rate-limited and fills nothing; 200
// namespaces fill the queue, and only their alerts are dropped. Each
// outcome is counted in watcher_alerts_total by result.
func TestSenderFailedRolloutNeverCrowdedOut(t *testing.T) {
	flap := func(ns string, i int) alert.Alert {
		return alert.Alert{Event: alert.Flapping, Sources: []alert.Source{{Object: alert.Object{Kind: "ConfigMap", Namespace: ns, Name: fmt.Sprintf("noise-%d", i)}}}}
	}
	held := func(ns string, i int) alert.Alert {
		return alert.Alert{Event: alert.Held, Reason: "flapping", Workload: &alert.Object{Kind: "Deployment", Namespace: ns, Name: fmt.Sprintf("w-%d", i)}}
	}
	for _, tt := range []struct {
		name                     string
		namespaces, perNamespace int
		failedIn                 string
		wantLimited, wantDropped float64
	}{
		// 5 per namespace pass the limit (Burst), the rest are limited.
		{"one namespace, 600 alerts; its own failed rollout", 1, 600, "ns-0", 595, 0},
		{"one namespace, 600 alerts; another's failed rollout", 1, 600, "team-b", 595, 0},
		// 1000 pass the limit, 100 fit the queue.
		{"200 namespaces, 6 alerts each", 200, 6, "team-b", 200, 900},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rcv := &receiver{statuses: []int{200}}
			srv := httptest.NewServer(rcv)
			defer srv.Close()
			sink := alert.Webhook
			limited, dropped := count(sink, alert.ResultLimited), count(sink, alert.ResultDropped)
			s, _ := start(t, alert.Config{Sink: sink, On: []string{alert.Held, alert.Flapping, alert.FailedRollout}})
			for n := range tt.namespaces {
				ns := fmt.Sprintf("ns-%d", n)
				for i := range tt.perNamespace {
					if i%2 == 0 {
						s.Notify(flap(ns, i))
					} else {
						s.Notify(held(ns, i))
					}
				}
			}
			s.Notify(alert.Alert{Event: alert.FailedRollout, Reason: "timeout", Workload: &alert.Object{Kind: "Deployment", Namespace: tt.failedIn, Name: "payments"}})
			if got := count(sink, alert.ResultLimited) - limited; got != tt.wantLimited {
				t.Errorf("%v rate-limited, want %v", got, tt.wantLimited)
			}
			if got := count(sink, alert.ResultDropped) - dropped; got != tt.wantDropped {
				t.Errorf("%v dropped, want %v (the failed rollout never among them)", got, tt.wantDropped)
			}
			s.SetURL(srv.URL)
			eventually(t, "the first alert received", func() bool { return rcv.requests() > 0 })
			rcv.mu.Lock()
			first := rcv.bodies[0]
			rcv.mu.Unlock()
			if !strings.Contains(first, `"event": "failed-rollout"`) || !strings.Contains(first, tt.failedIn+"/payments") {
				t.Errorf("first alert sent: %s, want the failed rollout", first)
			}
		})
	}
}
