package e2e

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/watcher-dev/watcher/internal/controller"
	"github.com/watcher-dev/watcher/internal/hold"
	"github.com/watcher-dev/watcher/test/fixture"
)

// refusedEvictions counts p's evictions the API server refused (429),
// from client-go's rest_client_requests_total: each is one look at the
// blocked restart.
func refusedEvictions(t *testing.T, p *proc) float64 {
	return sumSamples(t, p, func(line string) bool {
		return strings.HasPrefix(line, "rest_client_requests_total{") && strings.Contains(line, `method="POST"`) && strings.Contains(line, `code="429"`)
	})
}

// TestEvictBlockedStops: a restart by eviction that a PodDisruptionBudget
// of maxUnavailable 0 blocks is tried with backoff until --rollout-timeout,
// then not at all: no eviction is sent once it has failed, by the process
// that restarted it or by a new one started after, and the pod stays.
func TestEvictBlockedStops(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	cm := fixture.ConfigMap(ns, "shared", map[string]string{"k": "1"})
	d := slowDeployment(ns, "web", fixture.EnvFrom("shared", ""), time.Second)
	create(t, cm, d, pdb(ns, "web", nil, ptr.To(intstr.FromInt32(0))))
	args := []string{"--restart-strategy=evict", "--rollout-timeout=5s"}
	w := startWatcher(t, "watcher", ns, args...)
	waitAdopted(t, d)
	waitRunning(t, d)
	old := runningPods(t, ns, "web")

	setData(t, cm, "k", "2")
	g.Eventually(func() []string { return eventNotesOn(t, ns, "web", controller.ReasonEvictionBlocked) }, wait).ShouldNot(BeEmpty())
	g.Eventually(func() []string { return eventNotesOn(t, ns, "web", hold.ReasonRolloutFailed) }, wait).ShouldNot(BeEmpty())
	time.Sleep(2 * time.Second) // a look due before the timeout
	tried := refusedEvictions(t, w)
	g.Expect(tried).To(And(BeNumerically(">=", 1), BeNumerically("<=", 3)), "looks at 0 s, 2 s (and 6 s at most) before the 5 s timeout")
	g.Consistently(func() float64 { return refusedEvictions(t, w) }, 12*time.Second, time.Second).Should(Equal(tried), "failed: not tried again")

	w.Stop()
	w2 := startWatcher(t, "watcher-2", ns, args...)
	g.Eventually(func() float64 { return metricValue(t, w2, "watcher_leader") }, wait).Should(Equal(1.0), "the new process leads")
	g.Consistently(func() float64 { return refusedEvictions(t, w2) }, 12*time.Second, time.Second).Should(BeZero(), "a new process does not try again")
	g.Expect(runningPods(t, ns, "web")).To(Equal(old), "blocked: the pod stays")
}
