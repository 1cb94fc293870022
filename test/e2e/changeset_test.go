package e2e

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/hold"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/test/fixture"
)

// TestChangeSetSplitPairFailover (issue 30): a credential pair written 40 s
// apart, the username in a ConfigMap, then its password in a Secret, to a
// Deployment with watcher.dev/settle: 45s rolls out once, after the second
// write, carrying both (counted by ReplicaSets). The leader is killed
// while the set waits: the new leader resumes the same wait from the set
// kept on the Deployment. Two replicas in the lease mode, every other
// setting at its default (the debounce of 1s included).
func TestChangeSetSplitPairFailover(t *testing.T) {
	ns := namespace(t)
	user, pass := fixture.ConfigMap(ns, "user", map[string]string{"u": "a"}), fixture.Secret(ns, "pass", map[string]string{"p": "a"})
	create(t, user)
	create(t, pass)
	dep := fixture.Deployment(ns, "app", fixture.EnvFrom("user", "pass"))
	dep.Annotations = map[string]string{optin.Settle: "45s"}
	create(t, dep)
	args := []string{"--lock=lease", "--lease-duration=4s", "--lease-renew-deadline=3s", "--lease-retry-period=1s", "--coalesce=1s"}
	replicas := []*proc{startWatcher(t, "watcher-0", ns, args...), startWatcher(t, "watcher-1", ns, args...)}
	for _, p := range replicas {
		p.WaitReady(t)
	}
	leader := waitLeader(t, replicas)
	waitAdopted(t, dep)
	waitRunning(t, dep)
	g := NewWithT(t)
	g.Expect(replicaSets(t, dep)).To(Equal(1))

	setData(t, user, "u", "b")
	first := time.Now()
	g.Eventually(func() map[string]string { return get(t, &appsv1.Deployment{ObjectMeta: dep.ObjectMeta}).Annotations }, wait).
		Should(HaveKey(guard.PendingAnnotation), "the set waited for is kept on the Deployment")
	leader.Kill()
	standby := replicas[0]
	if standby == leader {
		standby = replicas[1]
	}
	g.Eventually(func() float64 { return metricValue(t, standby, "watcher_leader") }, wait, 100*time.Millisecond).Should(Equal(1.0), "the standby leads")
	time.Sleep(time.Until(first.Add(40 * time.Second)))
	g.Expect(replicaSets(t, dep)).To(Equal(1), "rolled before the second write")
	setData(t, pass, "p", "b")
	second := time.Now()
	g.Consistently(func() int { return replicaSets(t, dep) }, 40*time.Second, time.Second).Should(Equal(1), "rolled before the pair was quiet")
	g.Eventually(func() int { return replicaSets(t, dep) }, wait+10*time.Second, 200*time.Millisecond).Should(Equal(2))
	g.Expect(time.Since(second)).To(BeNumerically(">=", 44*time.Second))
	waitRunning(t, dep)
	g.Consistently(func() int { return replicaSets(t, dep) }, 3*time.Second, 200*time.Millisecond).Should(Equal(2), "one rollout in all")
	g.Expect(eventNote(t, ns, "Deployment", hold.ReasonChangeSetComplete)).To(And(ContainSubstring("ConfigMap user"), ContainSubstring("Secret pass")))
	g.Expect(eventNote(t, ns, "Deployment", "Restarted")).To(And(ContainSubstring("ConfigMap user"), ContainSubstring("Secret pass")))
	g.Expect(get(t, &appsv1.Deployment{ObjectMeta: dep.ObjectMeta}).Annotations).NotTo(HaveKey(guard.PendingAnnotation))
}
