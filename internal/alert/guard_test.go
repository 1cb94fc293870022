package alert_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/watcher-dev/watcher/internal/alert"
)

func TestFromGuard(t *testing.T) {
	web := &alert.Object{Kind: "Deployment", Namespace: "shop", Name: "web"}
	cfg := []alert.Source{{Object: alert.Object{Kind: "ConfigMap", Namespace: "shop", Name: "cfg"}}}
	for _, tt := range []struct {
		typ, workload, source string
		want                  alert.Alert
		ok                    bool
	}{
		{"held", "Deployment shop/web", "ConfigMap shop/cfg", alert.Alert{Event: alert.Held, Workload: web, Sources: cfg, Reason: "budget", Detail: "msg"}, true},
		{"flapping", "", "ConfigMap shop/cfg", alert.Alert{Event: alert.Flapping, Sources: cfg, Reason: "budget", Detail: "msg"}, true},
		{"rollout-failed", "Deployment shop/web", "", alert.Alert{Event: alert.FailedRollout, Workload: web, Reason: "budget", Detail: "msg"}, true},
		{"released", "Deployment shop/web", "", alert.Alert{}, false},
	} {
		t.Run(tt.typ, func(t *testing.T) {
			got, ok := alert.FromGuard(tt.typ, tt.workload, tt.source, "budget", "msg")
			if ok != tt.ok || !cmp.Equal(got, tt.want) {
				t.Errorf("FromGuard() = %+v %v, want %+v %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
