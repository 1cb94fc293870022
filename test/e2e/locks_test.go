package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/test/fixture"
	"github.com/watcher-dev/watcher/test/observe"
)

// This file and redis_mode_test.go and lease_test.go test the lock modes with
// several watcher replicas: who processes a change, what happens when a
// replica, Redis or the leader dies, and that no workload ever rolls twice
// for one change.

// fleet is a set of ConfigMaps, each used (envFrom) by the same number of
// Deployments whose rollouts are tracked.
type fleet struct {
	ns   string
	cms  []*corev1.ConfigMap
	deps [][]*appsv1.Deployment // by ConfigMap
	trs  [][]*observe.Tracker   // by ConfigMap
	// last is when each ConfigMap's last change was sent.
	last []time.Time
}

// newFleet creates configs ConfigMaps "cfg-N" holding v=0 and, for each, users
// Deployments "cfg-N-user-M" of the given replica count.
func newFleet(t *testing.T, ns string, configs, users int, replicas int32) *fleet {
	t.Helper()
	f := &fleet{ns: ns, last: make([]time.Time, configs)}
	for c := range configs {
		cm := fixture.ConfigMap(ns, name("cfg", c), map[string]string{"v": "0"})
		create(t, cm)
		f.cms = append(f.cms, cm)
		var deps []*appsv1.Deployment
		var trs []*observe.Tracker
		for u := range users {
			d := fixture.Deployment(ns, name(cm.Name+"-user", u), fixture.EnvFrom(cm.Name, ""))
			d.Spec.Replicas = ptr.To(replicas)
			trs = append(trs, track(t, d))
			deps = append(deps, d)
		}
		f.deps = append(f.deps, deps)
		f.trs = append(f.trs, trs)
	}
	return f
}

// waitAdopted waits until every Deployment has its record.
func (f *fleet) waitAdopted(t *testing.T) {
	t.Helper()
	c := k8s
	for _, deps := range f.deps {
		for _, d := range deps {
			NewWithT(t).Eventually(func(g Gomega) map[string]string {
				g.Expect(c.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
				return d.Annotations
			}, wait, 50*time.Millisecond).Should(HaveKey(plan.RecordAnnotation), "%s not adopted", d.Name)
		}
	}
}

// change sets v of ConfigMap c to value and returns the change.
func (f *fleet) change(t *testing.T, c int, value string) change {
	t.Helper()
	cm, cl := f.cms[c], k8s
	// Before the write is sent: a rollout for it can come before the
	// client has the answer (watcher reacts in milliseconds), never
	// before it was sent. (expectNothingLeft proves no change was missed.)
	sent := time.Now()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
			return err
		}
		cm.Data["v"] = value
		return cl.Update(ctx, cm)
	})
	if err != nil {
		t.Fatalf("update %s: %v", cm.Name, err)
	}
	f.last[c] = sent
	return change{id: "ConfigMap/" + f.ns + "/" + cm.Name + "/" + string(cm.UID) + "@" + cm.ResourceVersion}
}

// trackers returns every tracker.
func (f *fleet) trackers() []*observe.Tracker { return slices.Concat(f.trs...) }

// counts returns the rollouts of every workload, by name.
func (f *fleet) counts() map[string]int {
	out := map[string]int{}
	for _, tr := range f.trackers() {
		out[tr.Name] = tr.Count()
	}
	return out
}

// waitCounts waits until every workload rolled exactly n times, then checks
// that none rolls again during quiet.
func (f *fleet) waitCounts(t *testing.T, n int, quiet time.Duration) {
	t.Helper()
	want := map[string]int{}
	for _, tr := range f.trackers() {
		want[tr.Name] = n
	}
	NewWithT(t).Eventually(f.counts, 2*wait, 100*time.Millisecond).Should(Equal(want), "rollouts per workload")
	NewWithT(t).Consistently(f.counts, quiet, 100*time.Millisecond).Should(Equal(want), "rollouts per workload after a quiet period")
}

// waitRolledAfterLast waits until every workload's last rollout came after
// the last change of its ConfigMap.
func (f *fleet) waitRolledAfterLast(t *testing.T) {
	t.Helper()
	for c, trs := range f.trs {
		for _, tr := range trs {
			NewWithT(t).Eventually(func() bool {
				r := tr.Rollouts()
				return len(r) > 0 && r[len(r)-1].At.After(f.last[c])
			}, 2*wait, 50*time.Millisecond).Should(BeTrue(), "%s rolled after the last change of its ConfigMap", tr.Name)
		}
	}
}

// expectDistinctRollouts checks that no workload rolled twice for the same
// configuration, and returns the total number of rollouts.
func (f *fleet) expectDistinctRollouts(t *testing.T) int {
	t.Helper()
	total := 0
	for _, tr := range f.trackers() {
		seen := map[string]bool{}
		for _, r := range tr.Rollouts() {
			NewWithT(t).Expect(seen).NotTo(HaveKey(r.RestartedFor), "%s rolled twice for the same configuration", tr.Name)
			seen[r.RestartedFor] = true
			total++
		}
	}
	return total
}

// expectNothingLeft stops the given replicas and runs a fresh watcher: it
// must find every workload up to date (level-triggered proof that no change
// was lost).
func (f *fleet) expectNothingLeft(t *testing.T, replicas ...*proc) {
	t.Helper()
	for _, p := range replicas {
		p.Stop()
	}
	w := startWatcher(t, "watcher-check", f.ns, "--lock=none")
	w.WaitReady(t)
	waitLog(t, w, "Starting workers")
	time.Sleep(2 * time.Second)
	NewWithT(t).Expect(restartLines(w, "")).To(BeEmpty(), "a fresh watcher found workloads not rolled for their configuration")
}

// change is one data change made by a test. Its id is how watcher names it
// in its logs: the object and the resourceVersion the update gave it.
type change struct{ id string }

// loggedBy returns p's "changed, keys" lines of the change: one per time p
// processed it.
func (c change) loggedBy(p *proc) []string {
	return p.Logs.Matching("\tChanged\t", `"change": "`+c.id+`"`)
}

// metricValue returns the value of sample (a name with its labels, as in
// `watcher_lock_acquisitions_total{outcome="held"}`) in p's /metrics, 0 if
// it is absent.
func metricValue(t *testing.T, p *proc, sample string) float64 {
	t.Helper()
	for _, line := range strings.Split(p.Metrics(t), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: metric line %q: %v", p.Name, line, err)
			}
			return f
		}
	}
	return 0
}

func acquisitions(outcome string) string {
	return `watcher_lock_acquisitions_total{outcome="` + outcome + `"}`
}

// logTime returns the time stamp of a log line of watcher's text format.
func logTime(t *testing.T, line string) time.Time {
	t.Helper()
	ts, _, _ := strings.Cut(line, "\t")
	at, err := time.Parse("2006-01-02T15:04:05.000Z0700", ts)
	if err != nil {
		t.Fatalf("no time stamp in log line %q: %v", line, err)
	}
	return at
}

// waitNotReady waits until p's /readyz fails because of the lock backend,
// and its watcher_lock_backend_up is 0.
func waitNotReady(t *testing.T, p *proc) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		code, body := p.Ready()
		g.Expect(code).NotTo(Equal(http.StatusOK), "/readyz of %s", p.Name)
		g.Expect(body).To(ContainSubstring("[-]lock"), "/readyz of %s names the lock check", p.Name)
		g.Expect(metricValue(t, p, "watcher_lock_backend_up")).To(BeZero(), "watcher_lock_backend_up of %s", p.Name)
	}, wait, 200*time.Millisecond).Should(Succeed())
}

// waitBackendUp waits until p is ready and reports the lock backend up.
func waitBackendUp(t *testing.T, p *proc) {
	t.Helper()
	p.WaitReady(t)
	NewWithT(t).Eventually(func() float64 { return metricValue(t, p, "watcher_lock_backend_up") }, wait, 200*time.Millisecond).
		Should(Equal(1.0), "watcher_lock_backend_up of %s", p.Name)
}

// TestRedisThreeReplicasExactlyOnce: three replicas in the redis mode share
// 200 changes of 50 ConfigMaps. Each change is processed by exactly one
// replica, every replica takes part, and every workload rolls exactly once
// per change.
func TestRedisThreeReplicasExactlyOnce(t *testing.T) {
	ns := namespace(t)
	const configs, users, changes = 50, 2, 200
	f := newFleet(t, ns, configs, users, 1)
	redis := startRedis(t)
	var replicas []*proc
	for i := range 3 {
		// 400 rollouts in 15s, one per change: a test of the locks, not of storms.
		replicas = append(replicas, startWatcher(t, name("watcher", i), ns, append(redis.Args(), guardsOff...)...))
	}
	for _, p := range replicas {
		p.WaitReady(t)
	}
	f.waitAdopted(t)

	// About 15 changes a second, round-robin: two changes of one ConfigMap
	// are over three seconds apart.
	var made []change
	tick := time.NewTicker(time.Second / 15)
	start := time.Now()
	for i := range changes {
		<-tick.C
		made = append(made, f.change(t, i%configs, fmt.Sprint(i/configs+1)))
	}
	tick.Stop()
	t.Logf("%d changes made in %s", changes, time.Since(start).Round(time.Millisecond))

	f.waitCounts(t, changes/configs, 3*time.Second)
	NewWithT(t).Expect(f.expectDistinctRollouts(t)).To(Equal(changes * users))

	// Each change was logged by exactly one replica.
	perReplica := make([]int, len(replicas))
	var wrong []string
	for _, c := range made {
		var by []string
		for i, p := range replicas {
			n := len(c.loggedBy(p))
			perReplica[i] += n
			for range n {
				by = append(by, p.Name)
			}
		}
		if len(by) != 1 {
			wrong = append(wrong, fmt.Sprintf("%s logged by %v", c.id, by))
		}
	}
	NewWithT(t).Expect(wrong).To(BeEmpty(), "changes not logged by exactly one replica")

	var held, done, restarts float64
	working := 0
	for i, p := range replicas {
		acquired := metricValue(t, p, acquisitions("acquired"))
		h, d := metricValue(t, p, acquisitions("held")), metricValue(t, p, acquisitions("done"))
		held, done = held+h, done+d
		r := metricValue(t, p, `watcher_restarts_total{kind="Deployment"}`)
		restarts += r
		t.Logf("%s: %d changes logged, acquired %v, held %v, done %v, errors %v, restarts %v (%d restart lines)",
			p.Name, perReplica[i], acquired, h, d, metricValue(t, p, acquisitions("error")), r, len(restartLines(p, "Deployment")))
		NewWithT(t).Expect(acquired).To(BeNumerically(">=", perReplica[i]), "%s took the lock of every change it logged", p.Name)
		if acquired > 0 {
			working++
		}
	}
	NewWithT(t).Expect(perReplica[0]+perReplica[1]+perReplica[2]).To(Equal(changes), "change lines over all replicas")
	NewWithT(t).Expect(restarts).To(Equal(float64(changes*users)), "restarts over all replicas: one patch per rollout")
	NewWithT(t).Expect(working).To(Equal(len(replicas)), "replicas that took some changes")
	NewWithT(t).Expect(held+done).To(BeNumerically(">", 0), "replicas found changes locked or done by others")
}

// TestRedisKilledMidBurst: Redis is killed with SIGKILL in the middle of a
// burst of changes and comes back empty a few seconds later. While it is
// down the replicas say they are not ready; afterwards every workload is
// rolled for its last configuration, never twice for one configuration.
func TestRedisKilledMidBurst(t *testing.T) {
	ns := namespace(t)
	const configs, users, changes = 5, 4, 40
	f := newFleet(t, ns, configs, users, 1)
	redis := startRedis(t)
	var replicas []*proc
	// Each ConfigMap changes 8 times in 4 s, each change handled on its
	// own (--coalesce=0): the restart budget (kept in the cluster, so
	// shared by the replicas) and the flap hold would rightly hold the
	// last ones. This test is about Redis going away: guards off.
	args := append(redis.Args(), "--restart-budget=0", "--flap-threshold=0")
	for i := range 3 {
		replicas = append(replicas, startWatcher(t, name("watcher", i), ns, args...))
	}
	for _, p := range replicas {
		p.WaitReady(t)
	}
	f.waitAdopted(t)

	var downAt time.Time
	for i := range changes {
		f.change(t, i%configs, fmt.Sprint(i+1))
		if i == changes/2 {
			redis.Kill()
			downAt = time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, p := range replicas {
		waitNotReady(t, p)
	}
	// A change while every replica knows Redis is down.
	f.change(t, 0, "while-down")
	time.Sleep(time.Until(downAt.Add(6 * time.Second)))
	redis.Start(t)
	t.Logf("Redis down for %s", time.Since(downAt).Round(time.Millisecond))
	for _, p := range replicas {
		waitBackendUp(t, p)
	}

	f.waitRolledAfterLast(t)
	time.Sleep(3 * time.Second)
	total := f.expectDistinctRollouts(t)
	for _, p := range replicas {
		t.Logf("%s: acquired %v, held %v, done %v, errors %v, restart lines %d", p.Name,
			metricValue(t, p, acquisitions("acquired")), metricValue(t, p, acquisitions("held")),
			metricValue(t, p, acquisitions("done")), metricValue(t, p, acquisitions("error")), len(restartLines(p, "Deployment")))
	}
	t.Logf("%d rollouts of %d workloads for %d changes", total, configs*users, changes+1)
	f.expectNothingLeft(t, replicas...)
}
