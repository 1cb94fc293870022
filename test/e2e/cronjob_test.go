package e2e

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/trigger"
	"github.com/watcher-dev/watcher/test/fixture"
)

// TestCronJobTrigger: with --cronjob-trigger, a change of the ConfigMap a
// CronJob uses updates its jobTemplate once and runs one Job at once, whose
// pod runs the new template to completion (kwok's pod-complete stage).
func TestCronJobTrigger(t *testing.T) {
	ns := namespace(t)
	cm := fixture.ConfigMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	cj := fixture.CronJob(ns, "nightly", fixture.EnvFrom("cfg", ""))
	tr := track(t, cj)
	startWatcher(t, "watcher", ns, "--cronjob-trigger")
	waitAdopted(t, cj)
	stayRollouts(t, tr, 0, time.Second)

	setData(t, cm, "a", "2")
	waitRollouts(t, tr, 1)
	want := tr.Rollouts()[0].RestartedFor
	NewWithT(t).Expect(want).NotTo(BeEmpty())
	waitJobRan(t, cj, want)
	waitRestarted(t, ns, "nightly", "ConfigMap cfg changed (keys: a;")
	stayRollouts(t, tr, 1, time.Second)
}

// waitJobRan waits until the namespace of CronJob cj holds exactly one Job,
// the one of cj's restart for restartedFor, and the Job's one pod ran that
// template to completion.
func waitJobRan(t *testing.T, cj *batchv1.CronJob, restartedFor string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		var jobs batchv1.JobList
		g.Expect(k8s.List(ctx, &jobs, client.InNamespace(cj.Namespace))).To(Succeed())
		g.Expect(jobs.Items).To(HaveLen(1))
		job := jobs.Items[0]
		g.Expect(job.Name).To(Equal(trigger.JobName(cj.Name, restartedFor)))
		g.Expect(job.Status.Succeeded).To(Equal(int32(1)), "Job %s succeeded", job.Name)
		var pods corev1.PodList
		g.Expect(k8s.List(ctx, &pods, client.InNamespace(cj.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1))
		p := pods.Items[0]
		g.Expect(p.Status.Phase).To(Equal(corev1.PodSucceeded), "pod %s", p.Name)
		g.Expect(p.Annotations[plan.RestartAnnotation]).To(Equal(restartedFor), "pod %s runs the new template", p.Name)
	}, wait, 200*time.Millisecond).Should(Succeed(), "the Job of CronJob %s", cj.Name)
}
