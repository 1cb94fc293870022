package integration

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/restart"
)

// tenantFinalizer is a finalizer of a tenant's own on its Jobs.
const tenantFinalizer = "tenant.example.com/keep"

// recordOf returns the re-creation record of the Job ns/name, nil when
// there is none (watcher's own namespace here is "default").
func recordOf(t *testing.T, ns, name string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: "default", Name: restart.RecordName(ns, name)}, cm); err != nil {
		return nil
	}
	return cm
}

// dropFinalizer removes the tenant's finalizer from the Job named like j.
func dropFinalizer(t *testing.T, j *batchv1.Job) {
	t.Helper()
	cur := &batchv1.Job{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(j), cur); err != nil {
		t.Fatal(err)
	}
	edit(t, cur, func(j *batchv1.Job) { j.Finalizers = nil })
}

// TestJobRecreationFinishedByNextStart: a Job that opts in and carries a
// finalizer of its tenant's is deleted when its ConfigMap changes and
// stays being deleted; the Job to create is kept in a record. Touched
// meanwhile, it is not deleted or created again. watcher stops; the tenant
// removes the finalizer (the Job is gone); the next watcher creates it from
// the record, once, with the new record, watcher's finalizer removed, and
// the record deleted.
func TestJobRecreationFinishedByNextStart(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	migrate := job(ns, "migrate", envFrom("cfg", ""), map[string]string{optin.ReloaderAuto: "true"})
	migrate.Finalizers = []string{tenantFinalizer}
	create(t, migrate)
	oldUID := uidOf(t, migrate)
	t.Cleanup(func() { dropFinalizer(t, migrate) })
	w := startWatcher(t, ns)
	waitAdopted(t, migrate)

	setConfigMap(t, cm, "a", "2")
	g.Eventually(func() bool { return fetch(t, migrate).DeletionTimestamp != nil }, wait, 20*time.Millisecond).
		Should(BeTrue(), "the Job is deleted (and kept by its finalizer)")
	g.Expect(recordOf(t, ns, "migrate")).NotTo(BeNil(), "the Job to create is kept")
	for i := range 3 { // the tenant touches it
		edit(t, fetch(t, migrate), func(j *batchv1.Job) { j.Annotations["touched"] = fmt.Sprint(i) })
		time.Sleep(300 * time.Millisecond)
	}
	g.Expect(uidOf(t, migrate)).To(Equal(oldUID), "not deleted and created again while being deleted")
	w.Stop()

	dropFinalizer(t, migrate)
	g.Eventually(func() types.UID { return uidOf(t, migrate) }, wait, 20*time.Millisecond).Should(BeEmpty(), "the old Job is gone")
	startWatcher(t, ns)
	g.Eventually(func() types.UID { return uidOf(t, migrate) }, wait, 20*time.Millisecond).
		ShouldNot(BeEmpty(), "the next watcher creates the Job from the record")
	cur := fetch(t, migrate)
	g.Expect(cur.Annotations).To(HaveKeyWithValue(restart.RecreatedFromAnnotation, string(oldUID)))
	g.Expect(cur.Annotations[plan.RecordAnnotation]).To(ContainSubstring("ConfigMap/cfg"))
	g.Eventually(func() []string { return fetch(t, migrate).Finalizers }, wait, 20*time.Millisecond).
		ShouldNot(ContainElement(restart.RecreationFinalizer), "watcher's finalizer removed")
	g.Eventually(func() *corev1.ConfigMap { return recordOf(t, ns, "migrate") }, wait, 20*time.Millisecond).Should(BeNil(), "the record deleted")
	newUID := cur.UID
	g.Consistently(func() types.UID { return uidOf(t, migrate) }, quiet, 50*time.Millisecond).Should(Equal(newUID), "created once")
}

// TestBlockedJobsHoldNoWorker: twenty Jobs of one namespace, each kept
// from being deleted by its tenant's finalizer and touched every second,
// with one worker: a Deployment of another namespace is restarted within
// seconds of its change (before, each such Job held a worker 30 s).
func TestBlockedJobsHoldNoWorker(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	tenant := namespace(t)
	var other string
	t.Run("other", func(t *testing.T) { other = namespace(t) }) // a second namespace, named for a subtest
	cm := configMap(tenant, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	var jobs []*batchv1.Job
	for i := range 20 {
		j := job(tenant, fmt.Sprintf("migrate-%d", i), envFrom("cfg", ""), map[string]string{optin.ReloaderAuto: "true"})
		j.Finalizers = []string{tenantFinalizer}
		create(t, j)
		jobs = append(jobs, j)
	}
	t.Cleanup(func() {
		for _, j := range jobs {
			dropFinalizer(t, j)
		}
	})
	web := configMap(other, "web", map[string]string{"a": "1"})
	create(t, web)
	dep := track(t, deployment(other, "web", envFrom("web", "")))
	startWatcher(t, tenant, func(o *options.Options) {
		o.Namespaces = []string{tenant, other}
		o.Workers = 1
	})
	for _, j := range jobs {
		waitAdopted(t, j)
	}
	setConfigMap(t, cm, "a", "2")
	g.Eventually(func() int {
		n := 0
		for _, j := range jobs {
			if fetch(t, j).DeletionTimestamp != nil {
				n++
			}
		}
		return n
	}, wait, 50*time.Millisecond).Should(Equal(20), "every Job deleted, kept by its finalizer")
	// The goroutine reads its own keys: fetch writes into the Jobs of jobs.
	keys := make([]client.ObjectKey, len(jobs))
	for i, j := range jobs {
		keys[i] = client.ObjectKeyFromObject(j)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // the tenant touches every Job every second
		defer close(done)
		for i := 0; ; i++ {
			for _, key := range keys {
				cur := &batchv1.Job{}
				if k8s.Get(ctx, key, cur) == nil {
					cur.Annotations["touched"] = fmt.Sprint(i)
					_ = k8s.Update(ctx, cur)
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

	time.Sleep(2 * time.Second)
	start := time.Now()
	setConfigMap(t, web, "a", "2")
	waitRollouts(t, dep, 1)
	g.Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second), "another namespace's restart waits for no blocked Job")
	for _, j := range jobs {
		g.Expect(recordOf(t, tenant, j.Name)).NotTo(BeNil())
		g.Expect(fetch(t, j).DeletionTimestamp).NotTo(BeNil(), "still kept by its tenant")
	}
}
