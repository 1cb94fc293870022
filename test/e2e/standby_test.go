package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/test/fixture"
)

// TestStandbyStaysFlat: 10,000 changes of 10 ConfigMaps while a standby
// watches. The standby's work queue holds at most one item per object
// (before, one per change: 10,000) and its memory does not grow with the
// changes; the leader, debouncing (--coalesce=1s), rolls the workload of
// the burst once or twice (--coalesce-max=30s bounds a burst that lasts
// longer), not once per change, and settles.
func TestStandbyStaysFlat(t *testing.T) {
	ns := namespace(t)
	const configs, perConfig = 10, 1000
	var cms []*corev1.ConfigMap
	for i := range configs {
		cm := fixture.ConfigMap(ns, name("cfg", i), map[string]string{"v": "0"})
		create(t, cm)
		cms = append(cms, cm)
	}
	dep := fixture.Deployment(ns, "web", fixture.EnvFrom(cms[0].Name, ""))
	tr := track(t, dep)
	args := []string{"--lock=lease", "--lease-duration=4s", "--lease-renew-deadline=3s", "--lease-retry-period=1s", "--coalesce=1s", "--coalesce-max=30s"}
	args = append(args, guardsOff...) // 1,000 changes a ConfigMap would flap: this tests the queue
	replicas := []*proc{startWatcher(t, "watcher-0", ns, args...), startWatcher(t, "watcher-1", ns, args...)}
	for _, p := range replicas {
		p.WaitReady(t)
	}
	leader := waitLeader(t, replicas)
	standby := replicas[0]
	if standby == leader {
		standby = replicas[1]
	}
	waitAdopted(t, dep)
	// The controller's queue is controller-runtime's priority queue: its
	// depth is reported per priority.
	const depth = `workqueue_depth{controller="watcher",name="watcher",`
	heapBefore := metricValue(t, standby, "go_memstats_heap_inuse_bytes")

	// Each writer owns one ConfigMap: no write conflicts, 1,000 writes each.
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, configs)
	for _, cm := range cms {
		wg.Add(1)
		go func(cm *corev1.ConfigMap) {
			defer wg.Done()
			for j := 1; j <= perConfig; j++ {
				cm.Data["v"] = fmt.Sprint(j)
				if err := k8s.Update(ctx, cm); err != nil {
					errs <- fmt.Errorf("update %s: %w", cm.Name, err)
					return
				}
			}
		}(cm)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d changes in %s", configs*perConfig, time.Since(start).Round(time.Millisecond))

	// Let the standby's informers deliver every event and the debounce fire.
	time.Sleep(3 * time.Second)
	d := metricSum(t, standby, depth)
	heapAfter := metricValue(t, standby, "go_memstats_heap_inuse_bytes")
	t.Logf("standby %s: queue depth %.0f, heap in use %.1f MiB before, %.1f MiB after", standby.Name, d,
		heapBefore/(1<<20), heapAfter/(1<<20))
	// The standby's queue is real, and got the changes: its metrics are
	// there and items were added to it.
	NewWithT(t).Expect(standby.Metrics(t)).To(ContainSubstring(depth), "the standby exports its queue depth")
	adds := metricValue(t, standby, `workqueue_adds_total{controller="watcher",name="watcher"}`)
	t.Logf("standby %s: %.0f items added to its queue", standby.Name, adds)
	NewWithT(t).Expect(adds).To(BeNumerically(">", 0), "the standby's queue received the changes")
	NewWithT(t).Expect(d).To(BeNumerically("<=", configs+1), "one queue item per object at most")
	NewWithT(t).Expect(heapAfter-heapBefore).To(BeNumerically("<", 16<<20), "the standby's heap grew with the changes")

	NewWithT(t).Eventually(tr.Count, 60*time.Second, 100*time.Millisecond).Should(BeNumerically(">=", 1))
	time.Sleep(3 * time.Second)
	n := tr.Count()
	t.Logf("the user of cfg-0 rolled %d times for %d changes", n, perConfig)
	NewWithT(t).Expect(n).To(BeNumerically("<=", 2), "1,000 changes of one ConfigMap rolled its user %d times", n)
	stayRollouts(t, tr, n, 3*time.Second)
}

// metricSum sums the samples of p's /metrics whose name and labels start
// with prefix.
func metricSum(t *testing.T, p *proc, prefix string) float64 {
	return sumSamples(t, p, func(line string) bool { return strings.HasPrefix(line, prefix) })
}

// getRequests sums p's successful GET requests to the API server, from
// client-go's rest_client_requests_total.
func getRequests(t *testing.T, p *proc) float64 {
	return sumSamples(t, p, func(line string) bool {
		return strings.HasPrefix(line, "rest_client_requests_total{") && strings.Contains(line, `method="GET"`) && strings.Contains(line, `code="200"`)
	})
}

// sumSamples sums the samples of p's /metrics whose lines match.
func sumSamples(t *testing.T, p *proc, match func(line string) bool) float64 {
	t.Helper()
	sum := 0.0
	for _, line := range strings.Split(p.Metrics(t), "\n") {
		if strings.HasPrefix(line, "#") || !match(line) {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(line[strings.LastIndex(line, " "):]), 64)
		if err != nil {
			t.Fatalf("%s: metric line %q: %v", p.Name, line, err)
		}
		sum += f
	}
	return sum
}

// TestLeaseLeaderVerifiesRestarts: in the lease mode too, a restart is
// decided again from the changed object read from the API server whenever
// the workload's record may be newer than the leader's cache (a new
// leader's cache may lag the record the old leader just wrote): here, half
// of the workloads carry a record version newer than any object, as a
// leader with a newer cache would have written. The others, whose record
// the cache is newer than, restart with the patch alone. The Lease is
// renewed every 20s, so that the leader's GET requests in the few seconds
// measured are the reads of the verification. (The handover itself, with
// no workload rolled twice, is TestLeaseFailover's.)
func TestLeaseLeaderVerifiesRestarts(t *testing.T) {
	ns := namespace(t)
	const users, ahead = 8, 4
	f := newFleet(t, ns, 1, users, 1)
	leader := startWatcher(t, "watcher-0", ns, "--lock=lease", "--lease-duration=60s", "--lease-renew-deadline=40s", "--lease-retry-period=20s")
	leader.WaitReady(t)
	waitLeader(t, []*proc{leader})
	f.waitAdopted(t)
	for _, d := range f.deps[0][:ahead] {
		cur := &appsv1.Deployment{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(d), cur); err != nil {
			t.Fatal(err)
		}
		rec, err := plan.ParseRecord(cur.Annotations[plan.RecordAnnotation])
		if err != nil {
			t.Fatal(err)
		}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, plan.VersionAnnotation, plan.FormatVersion(rec, "99999999999"))
		if err := k8s.Patch(ctx, cur, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second) // the leader sees the annotations, and writes nothing

	before := getRequests(t, leader)
	f.change(t, 0, "1")
	f.waitCounts(t, 1, time.Second)
	gets := getRequests(t, leader) - before
	t.Logf("%d restarts, %.0f GET requests", users, gets)
	g := NewWithT(t)
	g.Expect(gets).To(BeNumerically(">=", ahead), "one read of the changed object per restart whose record may be newer")
	g.Expect(gets).To(BeNumerically("<", users), "no read for a restart the cache is newer for")
	f.expectDistinctRollouts(t)
}
