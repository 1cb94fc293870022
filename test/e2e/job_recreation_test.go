package e2e

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/test/fixture"
)

// tenantFinalizer is a finalizer of a tenant's own on its Jobs.
const tenantFinalizer = "tenant.example.com/keep"

// optedInJob is a Job of ns reading ConfigMap cfg, opting in on its
// metadata, with finalizers.
func optedInJob(ns, name, cfg string, finalizers ...string) *batchv1.Job {
	spec := fixture.EnvFrom(cfg, "")
	spec.RestartPolicy = corev1.RestartPolicyNever
	j := &batchv1.Job{ObjectMeta: fixture.Meta(ns, name), Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: spec}}}
	j.Annotations = map[string]string{optin.ReloaderAuto: "true"}
	j.Finalizers = finalizers
	return j
}

// jobNow returns the Job ns/name, nil when there is none.
func jobNow(t *testing.T, ns, name string) *batchv1.Job {
	t.Helper()
	j := &batchv1.Job{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, j); err != nil {
		return nil
	}
	return j
}

// editJob changes the Job ns/name, retrying on conflicts; a Job that is
// gone is left alone.
func editJob(t *testing.T, ns, name string, change func(*batchv1.Job)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		j := jobNow(t, ns, name)
		if j == nil {
			return nil
		}
		change(j)
		return k8s.Update(ctx, j)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// recordsOf counts the re-creation records of Jobs of ns (in every
// namespace: watcher's own is wherever it runs).
func recordsOf(t *testing.T, ns string) int {
	t.Helper()
	var l corev1.ConfigMapList
	if err := k8s.List(ctx, &l, client.HasLabels{restart.RecreationLabel}); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, cm := range l.Items {
		if len(cm.Annotations[restart.RecreationOfAnnotation]) > len(ns) && cm.Annotations[restart.RecreationOfAnnotation][:len(ns)+1] == ns+"/" {
			n++
		}
	}
	return n
}

// TestJobRecreationSurvivesSIGTERM: watcher deletes a Job to re-create it
// and is stopped (SIGTERM) before it can create it (the Job's tenant
// keeps it with a finalizer of its own). The tenant removes the
// finalizer; the next watcher process creates the Job from the record
// kept in the cluster: it runs its one pod to completion, once.
func TestJobRecreationSurvivesSIGTERM(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	cm := fixture.ConfigMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	create(t, optedInJob(ns, "migrate", "cfg", tenantFinalizer))
	t.Cleanup(func() { editJob(t, ns, "migrate", func(j *batchv1.Job) { j.Finalizers = nil }) })
	first := waitJobSucceeded(t, ns, "migrate", "")
	w := startWatcher(t, "watcher", ns)
	waitAdopted(t, jobNow(t, ns, "migrate"))

	setData(t, cm, "a", "2")
	g.Eventually(func() *metav1.Time { return jobNow(t, ns, "migrate").DeletionTimestamp }, wait, 100*time.Millisecond).
		ShouldNot(BeNil(), "deleted, kept by its tenant's finalizer")
	g.Expect(recordsOf(t, ns)).To(Equal(1), "the Job to create is kept in the cluster")
	w.Stop()

	editJob(t, ns, "migrate", func(j *batchv1.Job) { j.Finalizers = nil })
	g.Eventually(func() *batchv1.Job { return jobNow(t, ns, "migrate") }, wait, 100*time.Millisecond).Should(BeNil(), "the old Job is gone")
	startWatcher(t, "watcher-2", ns)
	second := waitJobSucceeded(t, ns, "migrate", first)
	g.Eventually(func() int { return recordsOf(t, ns) }, wait, 100*time.Millisecond).Should(BeZero(), "the record is removed")
	g.Expect(jobNow(t, ns, "migrate").Finalizers).NotTo(ContainElement(restart.RecreationFinalizer))
	g.Consistently(func() types.UID { return jobNow(t, ns, "migrate").UID }, 3*time.Second, 200*time.Millisecond).
		Should(Equal(second), "created once")
}

// TestCronJobRetainedRunsForbid: a CronJob with concurrencyPolicy Forbid,
// opted in through its pod template, keeps a finished run (a Job it
// controls, which inherited the opt-in). A change of its ConfigMap
// restarts the CronJob once; its finished run is neither deleted nor run
// again, and no other Job appears.
func TestCronJobRetainedRunsForbid(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	cm := fixture.ConfigMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	cj := fixture.CronJob(ns, "nightly", fixture.EnvFrom("cfg", ""))
	cj.Spec.ConcurrencyPolicy = batchv1.ForbidConcurrent
	cj.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](3)
	cj.Spec.JobTemplate.Spec.Template.Annotations = map[string]string{optin.ReloaderAuto: "true"}
	tr := track(t, cj) // creates it
	// A run as the CronJob controller makes it: the jobTemplate, the
	// CronJob as its controller.
	cur := get(t, cj)
	run := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly-29000000", Labels: cur.Spec.JobTemplate.Labels,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cur, batchv1.SchemeGroupVersion.WithKind("CronJob"))}},
		Spec: *cur.Spec.JobTemplate.Spec.DeepCopy()}
	create(t, run)
	runUID := waitJobSucceeded(t, ns, run.Name, "")
	startWatcher(t, "watcher", ns)
	waitAdopted(t, cj)

	setData(t, cm, "a", "2")
	waitRollouts(t, tr, 1)
	waitRestarted(t, ns, "nightly", "ConfigMap cfg changed (keys: a;")
	g.Consistently(func(g Gomega) {
		var jobs batchv1.JobList
		g.Expect(k8s.List(ctx, &jobs, client.InNamespace(ns))).To(Succeed())
		g.Expect(jobs.Items).To(HaveLen(1), "no Job run again, none added")
		g.Expect(jobs.Items[0].UID).To(Equal(runUID))
		g.Expect(jobs.Items[0].Status.Succeeded).To(Equal(int32(1)))
	}, 5*time.Second, 200*time.Millisecond).Should(Succeed())
	stayRollouts(t, tr, 1, time.Second)
}

// TestBlockedJobsHoldNoWorker: twenty Jobs of a tenant, deleted to be
// re-created (as many as the rollout waves let start; the others wait for
// a slot) and kept by the tenant's finalizer, touched every second:
// another namespace's restart takes about its usual time (measured before
// the Jobs were blocked), every other setting at its default.
func TestBlockedJobsHoldNoWorker(t *testing.T) {
	g := NewWithT(t)
	tenant := namespace(t)
	var other string
	t.Run("other", func(t *testing.T) { other = namespace(t) })
	// Each Job reads a ConfigMap of its own: their changes are handled in
	// parallel, by as many workers as there are.
	var names []string
	var cms []*corev1.ConfigMap
	for i := range 20 {
		names = append(names, fmt.Sprintf("migrate-%d", i))
		cms = append(cms, fixture.ConfigMap(tenant, fmt.Sprintf("cfg-%d", i), map[string]string{"a": "1"}))
		create(t, cms[i], optedInJob(tenant, names[i], cms[i].Name, tenantFinalizer))
	}
	t.Cleanup(func() {
		for _, n := range names {
			editJob(t, tenant, n, func(j *batchv1.Job) { j.Finalizers = nil })
		}
	})
	web := fixture.ConfigMap(other, "web", map[string]string{"a": "1"})
	create(t, web)
	dep := fixture.Deployment(other, "web", fixture.EnvFrom("web", ""))
	tr := track(t, dep) // creates it
	startWatcher(t, "watcher", tenant, "--namespaces="+tenant+","+other)
	waitAdopted(t, dep)
	for _, n := range names {
		waitAdopted(t, jobNow(t, tenant, n))
	}
	usual := timeRestart(t, web, tr, 1)

	for _, cm := range cms {
		setData(t, cm, "a", "2")
	}
	deleting := func() int {
		n := 0
		for _, name := range names {
			if j := jobNow(t, tenant, name); j != nil && j.DeletionTimestamp != nil {
				n++
			}
		}
		return n
	}
	// As many as the waves let start (rollout slots, a fair share per
	// namespace): the others are held, waiting for a slot.
	g.Eventually(deleting, wait, 200*time.Millisecond).Should(BeNumerically(">=", 5), "Jobs deleted, kept by their finalizer")
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { // the tenant touches every Job every second
		defer close(done)
		for i := 0; ; i++ {
			for _, n := range names {
				if j := jobNow(t, tenant, n); j != nil {
					j.Annotations["touched"] = fmt.Sprint(i)
					_ = k8s.Update(ctx, j)
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	defer func() { close(stop); <-done }()
	time.Sleep(3 * time.Second)
	blocked := timeRestart(t, web, tr, 2)
	t.Logf("another namespace's restart: %s usually, %s with 20 blocked Jobs touched every second", usual, blocked)
	g.Expect(blocked).To(BeNumerically("<", usual+3*time.Second))
	g.Expect(recordsOf(t, tenant)).To(Equal(deleting()), "one record per Job being re-created")
}

// timeRestart changes cm and returns how long until tr counts n rollouts.
func timeRestart(t *testing.T, cm *corev1.ConfigMap, tr interface{ Count() int }, n int) time.Duration {
	t.Helper()
	start := time.Now()
	setData(t, cm, "a", fmt.Sprint(n+1))
	NewWithT(t).Eventually(tr.Count, wait, 20*time.Millisecond).Should(Equal(n))
	return time.Since(start)
}
