package e2e

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/watcher-dev/watcher/test/fixture"
)

// TestPolicyWindow: the built binary and a ReloadPolicy whose target does
// not reference its source, with a maintenance window that opens at the
// next minute (UTC): a change of the source is held while the window is
// closed, and released as exactly one rollout of the target when it opens.
func TestPolicyWindow(t *testing.T) {
	installPolicyCRD(t)
	ns := namespace(t)
	cm := fixture.ConfigMap(ns, "shared", map[string]string{"LOG_LEVEL": "info"})
	create(t, cm)
	api := fixture.Deployment(ns, "api", fixture.PodSpec(corev1.Container{Name: "app", Image: "app:1"}))
	tr := track(t, api)
	w := startWatcher(t, "watcher", ns)
	w.WaitReady(t)

	// The window opens at the start of a minute at least 20s away, for
	// 30s: the change below is made while it is closed.
	opens := time.Now().UTC().Truncate(time.Minute).Add(time.Minute)
	if time.Until(opens) < 20*time.Second {
		opens = opens.Add(time.Minute)
	}
	create(t, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "watcher.dev/v1alpha1", "kind": "ReloadPolicy",
		"metadata": map[string]any{"namespace": ns, "name": "api-settings"},
		"spec": map[string]any{
			"sources": []any{map[string]any{"kind": "ConfigMap", "name": "shared"}},
			"targets": []any{map[string]any{"kind": "Deployment", "name": "api"}},
			"maintenanceWindows": []any{map[string]any{
				"schedule": fmt.Sprintf("%d %d * * *", opens.Minute(), opens.Hour()), "duration": "30s", "timeZone": "UTC",
			}},
		},
	}})
	waitAdopted(t, api)

	setData(t, cm, "LOG_LEVEL", "debug")
	waitLog(t, w, "Restart held", `"reason": "window"`)
	stayRollouts(t, tr, 0, time.Until(opens)-time.Second)
	waitRollouts(t, tr, 1)
	NewWithT(t).Expect(tr.Rollouts()[0].At).To(BeTemporally(">=", opens.Add(-time.Second)), "rolled only once the window opened")
	stayRollouts(t, tr, 1, 2*time.Second)
	waitRestarted(t, ns, "api", "ConfigMap shared changed (keys: LOG_LEVEL;")
}
