package integration

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/trigger"
	"github.com/watcher-dev/watcher/test/fixture"
)

// TestCronJobTriggerConcurrencyPolicy: with the trigger, a restarted
// CronJob whose scheduled Job is running (status.active, as the CronJob
// controller writes it) gets no Job with concurrencyPolicy Forbid, and a
// Normal Event says why; with Replace, the running Job is deleted and the
// trigger's Job created; with Allow, both run.
func TestCronJobTriggerConcurrencyPolicy(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	policies := map[string]batchv1.ConcurrencyPolicy{"forbid": batchv1.ForbidConcurrent, "replace": batchv1.ReplaceConcurrent, "allow": batchv1.AllowConcurrent}
	for name, policy := range policies {
		cj := fixture.CronJob(ns, name, envFrom("cfg", ""))
		cj.Spec.ConcurrencyPolicy = policy
		create(t, cj)
		// The scheduled run, as the CronJob controller starts it (none
		// runs here): owned by the CronJob, listed in its status.active.
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-29000000",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: name, UID: cj.UID, Controller: ptr.To(true)}}},
			Spec: *cj.Spec.JobTemplate.Spec.DeepCopy()}
		create(t, job)
		cj.Status.Active = []corev1.ObjectReference{{APIVersion: "batch/v1", Kind: "Job", Namespace: ns, Name: job.Name, UID: job.UID}}
		if err := k8s.Status().Update(ctx, cj); err != nil {
			t.Fatal(err)
		}
	}
	startWatcher(t, ns, func(o *options.Options) { o.CronJobTrigger = true })
	for name := range policies {
		waitAdopted(t, fixture.CronJob(ns, name, corev1.PodSpec{}))
	}
	setConfigMap(t, cm, "a", "2")

	g.Eventually(func() []string { return events(t, ns, "forbid", trigger.ReasonJobDeferred) }, wait).Should(ConsistOf(
		"No Job created now: concurrencyPolicy Forbid and Job forbid-29000000 running; the next scheduled run uses the new template"))
	g.Eventually(func() []string { return events(t, ns, "replace", trigger.ReasonJobCreated) }, wait).Should(ConsistOf(
		MatchRegexp(`^Created Job replace-watcher-[0-9a-f]{10} from the new template, replacing Job replace-29000000 \(concurrencyPolicy Replace\)$`)))
	g.Eventually(func() []string { return events(t, ns, "allow", trigger.ReasonJobCreated) }, wait).Should(ConsistOf(
		MatchRegexp(`^Created Job allow-watcher-[0-9a-f]{10} from the new template, beside running Job allow-29000000 \(concurrencyPolicy Allow\)$`)))

	names := func() []string {
		var out []string
		for _, j := range jobs(t, ns) {
			if j.DeletionTimestamp == nil {
				out = append(out, j.Name)
			}
		}
		return out
	}
	g.Eventually(names, wait).Should(ConsistOf("forbid-29000000", MatchRegexp(`^replace-watcher-`), "allow-29000000", MatchRegexp(`^allow-watcher-`)))
	g.Consistently(names, quiet, 50*time.Millisecond).Should(HaveLen(4))
	err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "replace-29000000"}, &batchv1.Job{})
	if err == nil {
		// Deleted in the background: gone once the garbage collector runs,
		// which does not run here; it is being deleted.
		j := &batchv1.Job{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "replace-29000000"}, j)).To(Succeed())
		g.Expect(j.DeletionTimestamp).NotTo(BeNil(), "Replace left the running Job alone")
	} else {
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	}
	g.Expect(events(t, ns, "forbid", trigger.ReasonTriggerFailed)).To(BeEmpty())
	g.Expect(events(t, ns, "replace", trigger.ReasonTriggerFailed)).To(BeEmpty())
}
