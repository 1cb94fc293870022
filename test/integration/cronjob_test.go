package integration

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/trigger"
	"github.com/watcher-dev/watcher/test/fixture"
)

// jobs returns the Jobs of namespace ns.
func jobs(t *testing.T, ns string) []batchv1.Job {
	t.Helper()
	var list batchv1.JobList
	if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// TestCronJobTrigger: a CronJob using a ConfigMap is watched and adopted
// without a restart or a Job; a change updates its jobTemplate once and,
// with the trigger, creates exactly one Job from the new template, owned by
// the CronJob; the same configuration decided a second time creates no
// second Job.
func TestCronJobTrigger(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	cj := fixture.CronJob(ns, "nightly", envFrom("cfg", ""))
	cj.Spec.JobTemplate.Annotations = map[string]string{"note": "from the jobTemplate"}
	tr := track(t, cj)
	restarts := testutil.ToFloat64(metrics.Restarts.WithLabelValues("CronJob"))
	w := startWatcher(t, ns, func(o *options.Options) {
		o.CronJobTrigger = true
		o.PrintInterval = time.Hour // the state is logged once, at start
	})
	waitLog(t, w, `"msg"="Watching"`, `"cronJobs"=1`)
	waitAdopted(t, cj)
	adopted := fetch(t, cj).Annotations[plan.RecordAnnotation]
	stayRollouts(t, tr, 0)
	g.Expect(jobs(t, ns)).To(BeEmpty(), "adoption runs nothing")

	setConfigMap(t, cm, "a", "2")
	waitRollouts(t, tr, 1)
	restartedFor := tr.Rollouts()[0].RestartedFor
	g.Expect(restartedFor).NotTo(BeEmpty())
	g.Eventually(func() []batchv1.Job { return jobs(t, ns) }, wait).Should(HaveLen(1))
	job := jobs(t, ns)[0]
	g.Expect(job.Name).To(Equal(trigger.JobName("nightly", restartedFor)))
	g.Expect(job.OwnerReferences).To(ConsistOf(metav1.OwnerReference{
		APIVersion: "batch/v1", Kind: "CronJob", Name: "nightly", UID: fetch(t, cj).UID, Controller: ptr.To(true),
	}))
	g.Expect(job.Annotations).To(HaveKeyWithValue(trigger.InstantiateAnnotation, "manual"))
	g.Expect(job.Annotations).To(HaveKeyWithValue("note", "from the jobTemplate"))
	g.Expect(job.Labels).To(HaveKeyWithValue("app", "nightly"))
	g.Expect(job.Spec.Template.Annotations).To(HaveKeyWithValue(plan.RestartAnnotation, restartedFor), "the Job runs the new template")
	g.Eventually(func() []string { return events(t, ns, "nightly", trigger.ReasonJobCreated) }, wait).
		Should(ConsistOf("Created Job " + job.Name + " from the new template"))
	g.Expect(testutil.ToFloat64(metrics.Restarts.WithLabelValues("CronJob"))).To(BeNumerically(">", restarts))

	// The record is put back to what it was before the change (a restore,
	// a replica that acted on an old read): watcher decides the same
	// restart again. The template is already restarted for it, and its Job
	// exists.
	restarted := fetch(t, cj).Annotations[plan.RecordAnnotation]
	edit(t, cj, func(c *batchv1.CronJob) { c.Annotations[plan.RecordAnnotation] = adopted })
	g.Eventually(func() string { return fetch(t, cj).Annotations[plan.RecordAnnotation] }, wait).Should(Equal(restarted))
	g.Eventually(func() []string { return restartLogs(w, "CronJob "+ns+"/nightly") }, wait).Should(HaveLen(2), "the second decision")
	g.Consistently(func() []batchv1.Job { return jobs(t, ns) }, quiet, 50*time.Millisecond).Should(HaveLen(1), "one Job per restart")
	stayRollouts(t, tr, 1)
	g.Expect(events(t, ns, "nightly", trigger.ReasonTriggerFailed)).To(BeEmpty())
}

// TestCronJobWithoutTrigger: by default a change updates the jobTemplate
// and runs nothing: the next scheduled Job runs the new template.
func TestCronJobWithoutTrigger(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	cj := fixture.CronJob(ns, "nightly", envFrom("cfg", ""))
	tr := track(t, cj)
	startWatcher(t, ns)
	waitAdopted(t, cj)
	setConfigMap(t, cm, "a", "2")
	waitRollouts(t, tr, 1)
	stayRollouts(t, tr, 1)
	NewWithT(t).Expect(jobs(t, ns)).To(BeEmpty())
}
