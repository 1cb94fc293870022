package e2e

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestRedisHolderStoppedReleasesLocks: replica A takes the locks of two
// changes and is stopped with SIGTERM while it works through their users,
// slowly. A gives its locks up as it stops, so replica B processes the
// changes within seconds, not after the locks' TTL (a minute), and every
// workload rolls exactly once.
//
// To make A take the changes, B waits two seconds (--coalesce) before it
// looks at a change; A may send one request a second to the API server, so
// the twelve restarts (and their Events) would take it half a minute.
func TestRedisHolderStoppedReleasesLocks(t *testing.T) {
	ns := namespace(t)
	const configs, users, ttl = 2, 6, time.Minute
	f := newFleet(t, ns, configs, users, 1)
	redis := startRedis(t)
	args := append(redis.Args(), "--lock-expiration-time=60")
	b := startWatcher(t, "watcher-b", ns, append(args, "--coalesce=2s")...)
	b.WaitReady(t)
	f.waitAdopted(t)
	a := startWatcher(t, "watcher-a", ns, append(args, "--kube-api-qps=1", "--kube-api-burst=1")...)
	a.WaitReady(t)
	time.Sleep(3 * time.Second) // A's rate limiter fills up again after its start-up requests

	for c := range configs {
		f.change(t, c, "1")
	}
	total := func() int {
		n := 0
		for _, c := range f.counts() {
			n += c
		}
		return n
	}
	NewWithT(t).Eventually(func() float64 { return metricValue(t, a, acquisitions("acquired")) }, wait, 20*time.Millisecond).
		Should(Equal(float64(configs)), "A took the lock of every change")
	NewWithT(t).Eventually(total, wait, 20*time.Millisecond).Should(BeNumerically(">", 0), "A restarted a first workload")
	NewWithT(t).Eventually(func() float64 { return metricValue(t, b, acquisitions("held")) }, wait, 20*time.Millisecond).
		Should(BeNumerically(">=", configs), "B found the changes held by A")
	aRestarts := metricValue(t, a, `watcher_restarts_total{kind="Deployment"}`)
	NewWithT(t).Expect(aRestarts).To(BeNumerically("<", configs*users), "A is still at work")
	stopped := time.Now()
	a.Stop()
	t.Logf("A restarted %v of %d workloads, then stopped in %s", aRestarts, configs*users, time.Since(stopped).Round(time.Millisecond))

	NewWithT(t).Eventually(f.counts, ttl/3, 50*time.Millisecond).Should(HaveEach(1), "every workload rolled, well before A's locks would expire")
	tookOver := time.Since(stopped)
	f.waitCounts(t, 1, 3*time.Second)
	NewWithT(t).Expect(f.expectDistinctRollouts(t)).To(Equal(configs * users))
	t.Logf("B finished the changes %s after A was sent SIGTERM (lock TTL %s); B: acquired %v, held %v, done %v, lock errors %v, restarts %v",
		tookOver.Round(time.Millisecond), ttl, metricValue(t, b, acquisitions("acquired")), metricValue(t, b, acquisitions("held")),
		metricValue(t, b, acquisitions("done")), metricValue(t, b, `watcher_errors_total{operation="lock"}`),
		metricValue(t, b, `watcher_restarts_total{kind="Deployment"}`))
	NewWithT(t).Expect(tookOver).To(BeNumerically("<", 15*time.Second), "B took the changes over within seconds of A's SIGTERM")
	NewWithT(t).Expect(metricValue(t, b, acquisitions("acquired"))).To(Equal(float64(configs)), "B took the lock of every change once A released it")
}
