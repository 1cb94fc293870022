package e2e

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/cause"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/test/fixture"
)

// TestDryRun: watcher --dry-run on a live set of workloads, two adopted by
// an earlier watcher and one it never saw, writes nothing to them (no
// record, no restart, no CronJob trigger Job: the same ReplicaSets and
// annotations) and says, once per change, what it would have done: a log
// line, an Event WouldRestart on the workload, watcher_would_restart_total.
// The workload it never saw is adopted in memory, so the next change says
// it would restart it too; a workload event in between announces nothing
// again.
func TestDryRun(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	cm := fixture.ConfigMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	adopted := fixture.Deployment(ns, "adopted", fixture.EnvFrom("cfg", ""))
	adoptedTr := track(t, adopted)
	cj := fixture.CronJob(ns, "nightly", fixture.EnvFrom("cfg", ""))
	cjTr := track(t, cj)
	real := startWatcher(t, "watcher", ns)
	real.WaitReady(t)
	waitAdopted(t, adopted)
	waitAdopted(t, cj)
	real.Stop()
	fresh := fixture.Deployment(ns, "fresh", fixture.EnvFrom("cfg", ""))
	freshTr := track(t, fresh)
	setData(t, cm, "a", "2") // while no watcher runs
	waitReplicaSets(t, ns, 2)
	before := watcherAnnotations(t, adopted, fresh, cj)
	g.Expect(before["fresh"]).To(Equal([2]string{}), "fresh is adopted by no one")

	w := startWatcherEnv(t, "dry", ns, []string{"DRY_RUN=true"}, "--cronjob-trigger")
	w.WaitReady(t)
	waitEvent(t, ns, "adopted", cause.ReasonWouldRestart, "ConfigMap cfg changed (keys: a;")
	waitEvent(t, ns, "nightly", cause.ReasonWouldRestart, "ConfigMap cfg changed (keys: a;")
	waitLog(t, w, "Dry run: would write the record, restarting nothing", `"workload": "Deployment `+ns+`/fresh"`, `"action": "adopt"`)
	g.Eventually(func() float64 { return metricValue(t, w, `watcher_would_restart_total{kind="Deployment"}`) }, wait).Should(Equal(1.0))

	// A workload event decides again: nothing new to say.
	edit(t, adopted, func(d *appsv1.Deployment) { d.Annotations["example.com/touched"] = "yes" })
	g.Consistently(func() float64 { return metricValue(t, w, `watcher_would_restart_total{kind="Deployment"}`) }, time.Second).Should(Equal(1.0))
	setData(t, cm, "a", "3")
	waitEvent(t, ns, "fresh", cause.ReasonWouldRestart, "ConfigMap cfg changed (keys: a;")
	g.Eventually(func() float64 { return metricValue(t, w, `watcher_would_restart_total{kind="Deployment"}`) }, wait).Should(Equal(3.0))
	g.Eventually(func() float64 { return metricValue(t, w, `watcher_would_restart_total{kind="CronJob"}`) }, wait).Should(Equal(2.0))
	g.Consistently(func() float64 { return metricValue(t, w, `watcher_would_restart_total{kind="Deployment"}`) }, 2*time.Second).Should(Equal(3.0))

	g.Expect(wouldRestartNotes(t, ns, "adopted")).To(ConsistOf(
		ContainSubstring("Dry run, nothing written: would restart because ConfigMap cfg changed (keys: a;"),
		ContainSubstring("Dry run, nothing written: would restart because ConfigMap cfg changed (keys: a;"),
	))
	g.Expect(wouldRestartNotes(t, ns, "fresh")).To(HaveLen(1))
	g.Expect(watcherAnnotations(t, adopted, fresh, cj)).To(Equal(before), "dry-run wrote to a workload")
	g.Expect(adoptedTr.Count()).To(Equal(0))
	g.Expect(freshTr.Count()).To(Equal(0))
	g.Expect(cjTr.Count()).To(Equal(0))
	waitReplicaSets(t, ns, 2)
	var jobs batchv1.JobList
	g.Expect(k8s.List(ctx, &jobs, client.InNamespace(ns))).To(Succeed())
	g.Expect(jobs.Items).To(BeEmpty(), "dry-run created a Job")
}

// watcherAnnotations returns, per workload, the annotations watcher writes.
func watcherAnnotations(t *testing.T, ws ...client.Object) map[string][2]string {
	out := map[string][2]string{}
	for _, w := range ws {
		a := get(t, w).GetAnnotations()
		out[w.GetName()] = [2]string{a[plan.RecordAnnotation], a[plan.HashKeyAnnotation]}
	}
	return out
}

// waitReplicaSets waits until ns holds n ReplicaSets, and checks that it
// keeps holding n.
func waitReplicaSets(t *testing.T, ns string, n int) {
	t.Helper()
	count := func() int {
		var rs appsv1.ReplicaSetList
		if err := k8s.List(ctx, &rs, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		return len(rs.Items)
	}
	NewWithT(t).Eventually(count, wait).Should(Equal(n))
	NewWithT(t).Consistently(count, time.Second).Should(Equal(n))
}

// wouldRestartNotes returns the notes of the WouldRestart Events of
// workload name.
func wouldRestartNotes(t *testing.T, ns, name string) []string {
	t.Helper()
	return env.Events(t, ns, name, cause.ReasonWouldRestart)
}

// edit changes obj on the API server, retrying conflicts.
func edit[T client.Object](t *testing.T, obj T, change func(T)) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		cur := get(t, obj)
		if cur.GetAnnotations() == nil {
			cur.SetAnnotations(map[string]string{})
		}
		change(cur)
		return k8s.Update(ctx, cur)
	}, wait).Should(Succeed())
}
