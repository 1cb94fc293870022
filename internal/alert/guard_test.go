package alert_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/watcher-dev/watcher/internal/alert"
	"github.com/watcher-dev/watcher/internal/object"
)

func TestFromGuard(t *testing.T) {
	web := &alert.Object{Kind: "Deployment", Namespace: "shop", Name: "web"}
	webRef := object.Ref{Kind: "Deployment", Namespace: "shop", Name: "web"}
	cfgRef := object.Ref{Kind: "ConfigMap", Namespace: "shop", Name: "cfg"}
	cfg := []alert.Source{{Object: alert.Object{Kind: "ConfigMap", Namespace: "shop", Name: "cfg"}}}
	for _, tt := range []struct {
		typ              string
		workload, source object.Ref
		want             alert.Alert
		ok               bool
	}{
		{"held", webRef, cfgRef, alert.Alert{Event: alert.Held, Workload: web, Sources: cfg, Reason: "budget", Detail: "msg"}, true},
		{"flapping", object.Ref{}, cfgRef, alert.Alert{Event: alert.Flapping, Sources: cfg, Reason: "budget", Detail: "msg"}, true},
		{"rollout-failed", webRef, object.Ref{}, alert.Alert{Event: alert.FailedRollout, Workload: web, Reason: "budget", Detail: "msg"}, true},
		{"released", webRef, object.Ref{}, alert.Alert{}, false},
	} {
		t.Run(tt.typ, func(t *testing.T) {
			got, ok := alert.FromGuard(tt.typ, tt.workload, tt.source, "budget", "msg")
			if ok != tt.ok || !cmp.Equal(got, tt.want) {
				t.Errorf("FromGuard() = %+v %v, want %+v %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
