package e2e

import (
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/test/fixture"
)

// holdArgs: a budget of one restart an hour, one rollout slot, a short
// rollout timeout, holds after a failed rollout, no flap detection.
var holdArgs = []string{"--restart-budget=1/1h", "--flap-threshold=0", "--max-concurrent-rollouts=1", "--rollout-timeout=4s", "--on-failed-rollout=hold"}

// TestHoldsSurviveRestart (issue 16, item 5): one watcher process uses up
// the restart budget of a Deployment and sees a rollout fail, which holds
// the other restarts of its change; it is stopped with SIGTERM and another
// process starts. The new process still holds both: the next change of the
// budget's Deployment rolls nothing, nor do the held restarts.
func TestHoldsSurviveRestart(t *testing.T) {
	ns := namespace(t)
	s := newHoldScene(t, ns)
	first := startWatcher(t, "watcher-0", ns, holdArgs...)
	s.hold(t, first)
	first.Stop()
	next := startWatcher(t, "watcher-1", ns, holdArgs...)
	next.WaitReady(t)
	s.expectHeld(t, next)
}

// TestHoldsSurviveLeaseHandover (issue 16, item 5): the same with two
// replicas in the lease mode; the leader that held is killed, and the new
// leader still holds.
func TestHoldsSurviveLeaseHandover(t *testing.T) {
	ns := namespace(t)
	s := newHoldScene(t, ns)
	args := append([]string{"--lock=lease", "--lease-duration=4s", "--lease-renew-deadline=3s", "--lease-retry-period=1s"}, holdArgs...)
	replicas := []*proc{startWatcher(t, "watcher-0", ns, args...), startWatcher(t, "watcher-1", ns, args...)}
	for _, p := range replicas {
		p.WaitReady(t)
	}
	leader := waitLeader(t, replicas)
	s.hold(t, leader)
	leader.Kill()
	standby := replicas[0]
	if standby == leader {
		standby = replicas[1]
	}
	g := NewWithT(t)
	g.Eventually(func() float64 { return metricValue(t, standby, "watcher_leader") }, wait, 100*time.Millisecond).Should(Equal(1.0), "the standby leads")
	s.expectHeld(t, standby)
}

// holdScene: a Deployment web on ConfigMap cfg, for the budget; a
// Deployment stuck whose rollout can never finish and two others, a and b,
// on ConfigMap shared, for the failed-rollout hold.
type holdScene struct {
	cfg, shared *corev1.ConfigMap
	web, stuck  *appsv1.Deployment
	others      []*appsv1.Deployment
}

func newHoldScene(t *testing.T, ns string) *holdScene {
	t.Helper()
	s := &holdScene{
		cfg:    fixture.ConfigMap(ns, "cfg", map[string]string{"a": "0"}),
		shared: fixture.ConfigMap(ns, "shared", map[string]string{"a": "0"}),
		web:    fixture.Deployment(ns, "web", fixture.EnvFrom("cfg", "")),
		stuck:  fixture.Deployment(ns, "stuck", fixture.EnvFrom("shared", "")),
		others: []*appsv1.Deployment{fixture.Deployment(ns, "a", fixture.EnvFrom("shared", "")), fixture.Deployment(ns, "b", fixture.EnvFrom("shared", ""))},
	}
	s.stuck.Annotations = map[string]string{guard.PriorityAnnotation: "0"} // first in the wave
	// One node, and pods that refuse to share it: the surge pod of a
	// rollout never schedules.
	s.stuck.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "stuck"}},
			TopologyKey:   "kubernetes.io/hostname",
		}},
	}}
	create(t, s.cfg, s.shared, s.web, s.stuck)
	create(t, s.others[0], s.others[1])
	return s
}

// hold makes p use up web's budget and see stuck's rollout fail.
func (s *holdScene) hold(t *testing.T, p *proc) {
	t.Helper()
	g := NewWithT(t)
	for _, d := range append([]*appsv1.Deployment{s.web, s.stuck}, s.others...) {
		waitAdopted(t, d)
		waitRunning(t, d)
	}
	setData(t, s.cfg, "a", "1")
	g.Eventually(func() int { return replicaSets(t, s.web) }, wait, 20*time.Millisecond).Should(Equal(2), "web rolled")
	waitRunning(t, s.web)
	setData(t, s.shared, "a", "1")
	g.Eventually(func() int { return replicaSets(t, s.stuck) }, wait, 20*time.Millisecond).Should(Equal(2), "stuck restarted")
	g.Eventually(func() string {
		return eventNotes(t, s.stuck.Namespace, "Deployment", "RolloutFailed", corev1.EventTypeWarning)
	}, wait, 100*time.Millisecond).
		Should(ContainSubstring("Rollout not done after 4s"))
	g.Eventually(func() float64 { return metricValue(t, p, `watcher_restarts_held{reason="failed-rollout"}`) }, wait, 100*time.Millisecond).
		Should(Equal(2.0), "%s holds a and b", p.Name)
	g.Expect([]int{replicaSets(t, s.others[0]), replicaSets(t, s.others[1])}).To(Equal([]int{1, 1}), "a and b held")
}

// expectHeld checks that p, which did not see the holds begin, holds
// them: web's next change rolls nothing (budget), nor do a and b
// (failed rollout).
func (s *holdScene) expectHeld(t *testing.T, p *proc) {
	t.Helper()
	g := NewWithT(t)
	setData(t, s.cfg, "a", "2")
	g.Eventually(func() float64 { return metricValue(t, p, `watcher_held_restarts_total{reason="budget"}`) }, wait, 100*time.Millisecond).
		Should(BeNumerically(">=", 1), "%s held web's restart for the budget", p.Name)
	g.Expect(eventNotes(t, s.web.Namespace, "Deployment", "RestartHeld", corev1.EventTypeWarning)).To(ContainSubstring("budget"))
	g.Eventually(func() float64 { return metricValue(t, p, `watcher_restarts_held{reason="failed-rollout"}`) }, wait, 100*time.Millisecond).
		Should(Equal(2.0), "%s holds a and b", p.Name)
	g.Consistently(func() []int {
		return []int{replicaSets(t, s.web), replicaSets(t, s.others[0]), replicaSets(t, s.others[1])}
	}, 5*time.Second, 100*time.Millisecond).Should(Equal([]int{2, 1, 1}), "ReplicaSets of web, a and b: nothing rolled")
}

// TestBurstRollsOnceWithDefaults (issue 16, item 11): eight edits of one
// ConfigMap in about 3 s by one writer, with the default settings
// (coalescing, flap threshold and quiet period, budget, wave), are one
// change: exactly one new ReplicaSet, soon after the burst (not after the
// two-minute flap quiet period), no Flapping and no RestartHeld Event.
func TestBurstRollsOnceWithDefaults(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	cm := fixture.ConfigMap(ns, "cfg", map[string]string{"k0": "0"})
	create(t, cm)
	web := fixture.Deployment(ns, "web", fixture.EnvFrom("cfg", ""))
	create(t, web)
	startWatcher(t, "watcher", ns, "--coalesce=1s") // startWatcher turns coalescing off: back to the default
	waitAdopted(t, web)
	waitRunning(t, web)

	start := time.Now()
	var end time.Time
	for i := 1; i <= 8; i++ {
		setData(t, cm, "k"+strconv.Itoa(i%4), strconv.Itoa(i))
		end = time.Now()
		time.Sleep(400 * time.Millisecond)
	}
	burst := end.Sub(start)
	g.Eventually(func() int { return replicaSets(t, web) }, wait, 50*time.Millisecond).Should(Equal(2), "one new ReplicaSet")
	seen := time.Since(end) // polled every 50ms
	t.Logf("burst of 8 edits in %s; the new ReplicaSet was seen %s after the last edit", burst.Round(time.Millisecond), seen.Round(10*time.Millisecond))
	g.Expect(seen).To(BeNumerically("<", 15*time.Second), "rolled soon after the burst, not after the flap quiet period")
	waitRunning(t, web)
	g.Consistently(func() int { return replicaSets(t, web) }, 5*time.Second, 100*time.Millisecond).Should(Equal(2), "exactly one rollout")
	g.Expect(events(t, ns, "ConfigMap", "Flapping")).To(BeEmpty(), "Flapping Events")
	g.Expect(events(t, ns, "Deployment", "RestartHeld")).To(BeEmpty(), "RestartHeld Events")
}

// TestWaveHeldRestartsSurviveRedisStop (issue 16, item 5, the redis lock
// mode): eight Deployments share a ConfigMap, two rollout slots. Replica A
// takes the change and starts the first wave; the other restarts wait in
// the wave when A is stopped with SIGTERM. Replica B, which found the
// change held by A, restarts every one that A did not, well before the
// lock's TTL (the default, five minutes): A gives the lock of a change it
// kept for held restarts up as it stops. Each Deployment rolls exactly
// once.
func TestWaveHeldRestartsSurviveRedisStop(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	cm := fixture.ConfigMap(ns, "shared", map[string]string{"a": "0"})
	create(t, cm)
	var deps []*appsv1.Deployment
	for i := range 8 {
		d := slowDeployment(ns, name("app", i), fixture.EnvFrom("shared", ""), 3*time.Second)
		deps = append(deps, d)
		create(t, d)
	}
	redis := startRedis(t)
	args := append(redis.Args(), "--max-concurrent-rollouts=2", "--restart-budget=0", "--flap-threshold=0")
	// B waits two seconds before it looks at a change: A takes it.
	b := startWatcher(t, "watcher-b", ns, append(args, "--coalesce=2s")...)
	b.WaitReady(t)
	for _, d := range deps {
		waitAdopted(t, d)
		waitRunning(t, d)
	}
	a := startWatcher(t, "watcher-a", ns, args...)
	a.WaitReady(t)

	setData(t, cm, "a", "1")
	g.Eventually(func() float64 { return metricValue(t, a, `watcher_restarts_held{reason="wave"}`) }, wait, 20*time.Millisecond).
		Should(BeNumerically(">", 0), "A holds restarts in the wave")
	g.Expect(metricValue(t, a, acquisitions("acquired"))).To(Equal(1.0), "A took the change")
	aRolled := rolled(t, deps)
	a.Stop()
	t.Logf("A restarted %d of %d Deployments before SIGTERM", aRolled, len(deps))
	g.Expect(aRolled).To(BeNumerically("<", len(deps)), "restarts were left waiting")

	start := time.Now()
	g.Eventually(func() int { return rolled(t, deps) }, wait, 100*time.Millisecond).Should(Equal(len(deps)), "every Deployment rolled")
	t.Logf("B restarted the other %d within %s", len(deps)-aRolled, time.Since(start).Round(100*time.Millisecond))
	for _, d := range deps {
		waitRunning(t, d)
	}
	g.Consistently(func() []int {
		var n []int
		for _, d := range deps {
			n = append(n, replicaSets(t, d))
		}
		return n
	}, 3*time.Second, 200*time.Millisecond).Should(HaveEach(2), "ReplicaSets: each Deployment rolled exactly once")
}
