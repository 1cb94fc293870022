package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestLeaseFailover: three replicas in the lease mode. The leader is killed
// with SIGKILL in the middle of a burst of changes, then the next leader is
// stopped with SIGTERM in the middle of another. Each time a standby takes
// over and handles every change; no workload rolls twice for the same
// configuration; no replica restarts anything before it leads. The failover
// gaps are logged.
func TestLeaseFailover(t *testing.T) {
	ns := namespace(t)
	const configs, users = 5, 3
	f := newFleet(t, ns, configs, users, 1)
	args := []string{"--lock=lease", "--lease-duration=4s", "--lease-renew-deadline=3s", "--lease-retry-period=1s"}
	args = append(args, guardsOff...) // 8 changes a ConfigMap: a failover test, not a storm
	var replicas []*proc
	for i := range 3 {
		replicas = append(replicas, startWatcher(t, name("watcher", i), ns, args...))
	}
	for _, p := range replicas {
		p.WaitReady(t)
	}
	leader := waitLeader(t, replicas)
	f.waitAdopted(t)

	for _, stop := range []struct {
		signal string
		fn     func(*proc)
	}{{"SIGKILL", (*proc).Kill}, {"SIGTERM", (*proc).Stop}} {
		stoppedAt := f.burstStopping(t, leader, stop.fn)
		replicas = slices.DeleteFunc(replicas, func(p *proc) bool { return p == leader })
		next := waitLeader(t, replicas)
		acquired := logTime(t, firstLog(t, next, "acquired lease")).Sub(stoppedAt)
		restart := logTime(t, firstLog(t, next, "\tRestarted\t")).Sub(stoppedAt)
		t.Logf("%s of the leader %s: %s acquired the Lease %s later, restarted its first workload %s later",
			stop.signal, leader.Name, next.Name, acquired.Round(time.Millisecond), restart.Round(time.Millisecond))
		if stop.signal == "SIGKILL" {
			// The Lease was not released: the standby must wait for it to
			// expire (4s after its last renewal, renewed every second).
			NewWithT(t).Expect(acquired).To(BeNumerically(">=", 2*time.Second), "the new leader waited for the Lease to expire")
		}
		f.waitRolledAfterLast(t)
		leader = next
	}
	time.Sleep(2 * time.Second)
	total := f.expectDistinctRollouts(t)
	t.Logf("%d rollouts of %d workloads", total, configs*users)
	f.expectNothingLeft(t, replicas...)
	for _, p := range replicas {
		expectRestartsOnlyWhileLeading(t, p)
	}
}

// burstStopping makes 20 changes, about 7 a second, round-robin over the
// ConfigMaps, and stops p with stop after the tenth. It returns when p was
// stopped.
func (f *fleet) burstStopping(t *testing.T, p *proc, stop func(*proc)) time.Time {
	t.Helper()
	var stoppedAt time.Time
	stopped := make(chan struct{})
	for i := range 20 {
		f.change(t, i%len(f.cms), fmt.Sprintf("%d-%d", i, time.Now().UnixNano()))
		if i == 10 {
			stoppedAt = time.Now()
			go func() { stop(p); close(stopped) }()
		}
		time.Sleep(150 * time.Millisecond)
	}
	<-stopped
	expectRestartsOnlyWhileLeading(t, p)
	return stoppedAt
}

// waitLeader waits until exactly one of replicas leads, and returns it. The
// others must be ready and report watcher_leader 0.
func waitLeader(t *testing.T, replicas []*proc) *proc {
	t.Helper()
	var leader *proc
	NewWithT(t).Eventually(func() []string {
		var leaders []string
		for _, p := range replicas {
			if metricValue(t, p, "watcher_leader") == 1 {
				leader, leaders = p, append(leaders, p.Name)
			}
		}
		return leaders
	}, wait, 100*time.Millisecond).Should(HaveLen(1), "replicas leading")
	for _, p := range replicas {
		if p == leader {
			continue
		}
		NewWithT(t).Expect(metricValue(t, p, "watcher_leader")).To(BeZero(), "watcher_leader of the standby %s", p.Name)
		code, body := p.Ready()
		NewWithT(t).Expect(code).To(Equal(http.StatusOK), "/readyz of the standby %s: %s", p.Name, body)
	}
	return leader
}

// firstLog waits for p's first line containing sub and returns it.
func firstLog(t *testing.T, p *proc, sub string) string {
	t.Helper()
	waitLog(t, p, sub)
	return p.Logs.Matching(sub)[0]
}

// expectRestartsOnlyWhileLeading checks that p restarted nothing before it
// acquired the Lease.
func expectRestartsOnlyWhileLeading(t *testing.T, p *proc) {
	t.Helper()
	restarts := restartLines(p, "Deployment")
	if len(restarts) == 0 {
		return
	}
	acquired := p.Logs.Matching("acquired lease")
	NewWithT(t).Expect(acquired).NotTo(BeEmpty(), "%s restarted workloads without leading", p.Name)
	NewWithT(t).Expect(logTime(t, restarts[0])).NotTo(BeTemporally("<", logTime(t, acquired[0])),
		"%s restarted a workload before it acquired the Lease", p.Name)
}
