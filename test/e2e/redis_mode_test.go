package e2e

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/watcher-dev/watcher/internal/lock"
	"github.com/watcher-dev/watcher/test/fixture"
)

// TestRedisReplicaKilledHoldingLocks: replica A takes the locks of some
// changes and is killed with SIGKILL before it has finished them. Replica B
// processes those changes once their locks expire, and every workload rolls
// exactly once per change.
//
// To make A take the changes, and take long over them, B waits two seconds
// (--coalesce) before it looks at a change, and A may send one request a
// second to the API server: it restarts one of a ConfigMap's five users at
// most before it is killed.
func TestRedisReplicaKilledHoldingLocks(t *testing.T) {
	ns := namespace(t)
	const configs, users, ttl = 3, 5, 4 * time.Second
	f := newFleet(t, ns, configs, users, 1)
	redis := startRedis(t)
	args := append(redis.Args(), "--lock-expiration-time=4")
	b := startWatcher(t, "watcher-b", ns, append(args, "--coalesce=2s")...)
	b.WaitReady(t)
	f.waitAdopted(t)
	a := startWatcher(t, "watcher-a", ns, append(args, "--kube-api-qps=1", "--kube-api-burst=1")...)
	a.WaitReady(t)
	waitLog(t, a, "Starting workers")
	// Let A's rate limiter fill up again after its start-up requests.
	time.Sleep(2 * time.Second)

	var made []change
	for c := range configs {
		made = append(made, f.change(t, c, "1"))
	}
	NewWithT(t).Eventually(func() int { return len(a.Logs.Matching("\tChanged\t")) }, wait, 10*time.Millisecond).
		Should(BeNumerically(">", 0), "A took a change")
	time.Sleep(200 * time.Millisecond) // A logs the other changes it takes at once
	a.Kill()
	aRestarts := len(restartLines(a, "Deployment"))

	f.waitCounts(t, 1, 3*time.Second)
	f.expectDistinctRollouts(t)
	taken := 0
	for _, c := range made {
		aLines := c.loggedBy(a)
		NewWithT(t).Expect(len(aLines)).To(BeNumerically("<=", 1), "A logged %s", c.id)
		NewWithT(t).Eventually(func() []string { return c.loggedBy(b) }, wait, 50*time.Millisecond).Should(HaveLen(1), "B logged %s once", c.id)
		if len(aLines) == 0 {
			continue
		}
		taken++
		gap := logTime(t, c.loggedBy(b)[0]).Sub(logTime(t, aLines[0]))
		t.Logf("%s: A took it, B took it %s later", c.id, gap.Round(time.Millisecond))
		NewWithT(t).Expect(gap).To(BeNumerically(">=", ttl-time.Second), "B took %s only once A's lock expired", c.id)
	}
	bRestarts := len(restartLines(b, "Deployment"))
	t.Logf("A took %d of %d changes and restarted %d workloads before it was killed; B restarted %d; B found changes held %v times",
		taken, configs, aRestarts, bRestarts, metricValue(t, b, acquisitions("held")))
	NewWithT(t).Expect(aRestarts + bRestarts).To(Equal(configs * users))
	NewWithT(t).Expect(bRestarts).To(BeNumerically(">", 0), "B finished A's work")
}

// TestRedisLockRefreshedDuringProcessing: processing a change takes several
// times longer than the lock lives. The holder refreshes its lock while it
// works, so the other replica finds the change held, then done: one replica
// processes it, no lock expires, and every workload rolls once.
func TestRedisLockRefreshedDuringProcessing(t *testing.T) {
	ns := namespace(t)
	const users = 12
	const ttl = time.Second
	f := newFleet(t, ns, 1, users, 1)
	redis := startRedis(t)
	// Twelve patches at two requests a second take about six seconds; the
	// lock lives one.
	args := append(redis.Args(), "--lock-expiration-time=1", "--kube-api-qps=2", "--kube-api-burst=1")
	replicas := []*proc{startWatcher(t, "watcher-0", ns, args...), startWatcher(t, "watcher-1", ns, args...)}
	for _, p := range replicas {
		p.WaitReady(t)
	}
	f.waitAdopted(t)
	time.Sleep(time.Second) // the rate limiters fill up again

	start := time.Now()
	f.change(t, 0, "1")
	NewWithT(t).Eventually(f.counts, 2*wait, 100*time.Millisecond).Should(HaveEach(1), "every workload rolled")
	took := time.Since(start)
	f.waitCounts(t, 1, 3*time.Second)
	NewWithT(t).Expect(f.expectDistinctRollouts(t)).To(Equal(users))
	t.Logf("the change took %s to process, with a lock TTL of %s", took.Round(time.Millisecond), ttl)

	var acquired, held, lockErrors, restarts float64
	for _, p := range replicas {
		a, h := metricValue(t, p, acquisitions("acquired")), metricValue(t, p, acquisitions("held"))
		e, r := metricValue(t, p, `watcher_errors_total{operation="lock"}`), metricValue(t, p, `watcher_restarts_total{kind="Deployment"}`)
		acquired, held, lockErrors, restarts = acquired+a, held+h, lockErrors+e, restarts+r
		t.Logf("%s: acquired %v, held %v, done %v, lock errors %v, restarts %v", p.Name, a, h, metricValue(t, p, acquisitions("done")), e, r)
		NewWithT(t).Expect(p.Logs.Matching(lock.ErrExpired.Error())).To(BeEmpty(), "%s reported an expired lock", p.Name)
	}
	NewWithT(t).Expect(acquired).To(Equal(1.0), "lock acquisitions over both replicas: one replica processed the change")
	NewWithT(t).Expect(held).To(BeNumerically(">", 0), "the other replica found the change held")
	NewWithT(t).Expect(lockErrors).To(BeZero(), "lock errors over both replicas")
	NewWithT(t).Expect(restarts).To(Equal(float64(users)), "restarts over both replicas")
	NewWithT(t).Expect(took).To(BeNumerically(">", 3*ttl), "processing outlasted the lock's TTL (else this test proves nothing)")
}

// TestRedisBadInput: what watcher does with a Redis it cannot reach, wrong
// credentials, an invalid port, and the environment of earlier versions.
func TestRedisBadInput(t *testing.T) {
	t.Run("unreachable at start", func(t *testing.T) {
		ns := namespace(t)
		cm := fixture.ConfigMap(ns, "cfg", map[string]string{"a": "1"})
		create(t, cm)
		dep := fixture.Deployment(ns, "web", fixture.EnvFrom("cfg", ""))
		tr := track(t, dep)
		_, port, _ := net.SplitHostPort(fixture.FreeAddr(t)) // nothing listens there
		redis := &redisServer{}
		redis.Port, _ = strconv.Atoi(port)
		w := startWatcher(t, "watcher", ns, redis.Args()...)
		waitNotReady(t, w)
		waitLog(t, w, "Redis unreachable")
		waitAdopted(t, dep) // workloads are adopted without a lock

		setData(t, cm, "a", "2")
		waitLog(t, w, "Cannot take the lock of the change")
		// The change waits for the lock. A decision made through the
		// workload itself (an event of its own: here, on a busy machine,
		// the echo of its adoption) may restart it without one, as at
		// start-up; never twice (every patch is conditional): at most one
		// rollout, now and after Redis answers.
		g := NewWithT(t)
		g.Consistently(func() int { return len(tr.Rollouts()) }, 2*time.Second, 100*time.Millisecond).Should(BeNumerically("<=", 1))
		redis.Start(t)
		t.Cleanup(redis.Kill)
		waitBackendUp(t, w)
		waitRollouts(t, tr, 1)
		stayRollouts(t, tr, 1, 2*time.Second)
		waitRestarted(t, ns, "web", "ConfigMap cfg changed (keys: a;")
	})

	t.Run("wrong credentials", func(t *testing.T) {
		ns := namespace(t)
		const right, wrong = "right-pw-7Qx2", "wrong-pw-9Kd4"
		redis := startRedis(t, "--requirepass", right)
		base := append(redis.Args(), "--namespaces="+ns, "--lease-namespace="+ns, "--metrics-addr=0", "--health-addr=0")
		for _, tc := range []struct {
			name string
			env  []string
			args []string
		}{
			{"flag", nil, []string{"--redis-password=" + wrong}},
			{"env", []string{"PASSWORD=" + wrong}, nil},
			{"user and password", []string{"USERNAME=someone", "PASSWORD=" + right}, nil},
			{"none", nil, nil},
		} {
			code, out := runWatcher(t, tc.env, append(base, tc.args...)...)
			NewWithT(t).Expect(code).To(Equal(1), "%s: exit code; output:\n%s", tc.name, out)
			NewWithT(t).Expect(out).To(And(ContainSubstring("USERNAME"), ContainSubstring("PASSWORD")), tc.name)
			NewWithT(t).Expect(out).NotTo(Or(ContainSubstring(right), ContainSubstring(wrong)), "%s: the output shows a password", tc.name)
			NewWithT(t).Expect(out).NotTo(ContainSubstring("Starting watcher"), tc.name)
			t.Logf("%s: %s", tc.name, firstLine(out, "Watcher stopped"))
		}
	})

	t.Run("invalid port", func(t *testing.T) {
		for _, tc := range []struct {
			env, args []string
			names     string
		}{
			{[]string{"REDIS_PORT=99999"}, nil, "REDIS_PORT"},
			{[]string{"REDIS_HOST=127.0.0.1", "REDIS_PORT=abc"}, nil, "REDIS_PORT"},
			{nil, []string{"--redis-port=99999"}, "redis-port"},
		} {
			code, out := runWatcher(t, tc.env, append([]string{"--lock=redis"}, tc.args...)...)
			NewWithT(t).Expect(code).To(Equal(2), "%v %v: exit code; output:\n%s", tc.env, tc.args, out)
			NewWithT(t).Expect(out).To(ContainSubstring(tc.names), "%v %v", tc.env, tc.args)
			t.Logf("%v %v: %s", tc.env, tc.args, firstLine(out, "watcher: "))
		}
	})

	t.Run("REDIS_HOST selects the redis mode", func(t *testing.T) {
		ns := namespace(t)
		cm := fixture.ConfigMap(ns, "cfg", map[string]string{"a": "1"})
		create(t, cm)
		dep := fixture.Deployment(ns, "web", fixture.EnvFrom("cfg", ""))
		tr := track(t, dep)
		redis := startRedis(t)
		w := startWatcherEnv(t, "watcher", ns, []string{"REDIS_HOST=127.0.0.1", "REDIS_PORT=" + strconv.Itoa(redis.Port)})
		waitLog(t, w, "Starting watcher", `"lock": "redis"`)
		waitBackendUp(t, w)
		waitAdopted(t, dep)
		setData(t, cm, "a", "2")
		waitRollouts(t, tr, 1)
		NewWithT(t).Expect(metricValue(t, w, acquisitions("acquired"))).To(Equal(1.0), "the change went through a Redis lock")
	})
}

// firstLine returns the first line of out containing sub.
func firstLine(out, sub string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
