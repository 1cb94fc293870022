package controller

import (
	"context"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/settings"
	"github.com/watcher-dev/watcher/internal/store"
	"github.com/watcher-dev/watcher/internal/workload"
)

// jobHasher is the installation's hash key of these tests.
var jobHasher = hash.NewHasher([]byte("jobs-test-installation-key-0123"))

// jobEnv is a reconciler whose store (client-go fakes) and API server
// (controller-runtime's fake client) start with the same objects; the API
// server counts the writes it is sent, by verb and kind, dry-runs apart.
type jobEnv struct {
	r      *Reconciler
	server client.Client
	mu     sync.Mutex
	writes map[string]int
	// afterDelete, when set, runs after each delete is answered.
	afterDelete func()
}

func (e *jobEnv) count(verb string, obj client.Object, dryRun bool) {
	kind := "Job"
	switch obj.(type) {
	case *corev1.ConfigMap:
		kind = "ConfigMap"
	case *batchv1.CronJob:
		kind = "CronJob"
	}
	if dryRun {
		verb += " (dry-run)"
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.writes[verb+" "+kind]++
}

func (e *jobEnv) sent(key string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.writes[key]
}

// newJobEnv starts a jobEnv holding objs, deciding with discovery.
func newJobEnv(t *testing.T, ctx context.Context, discovery string, objs ...client.Object) *jobEnv {
	t.Helper()
	var stored []runtime.Object
	for _, o := range objs {
		stored = append(stored, o.DeepCopyObject())
	}
	st, err := store.New(kubefake.NewClientset(stored...), store.Options{Hasher: jobHasher,
		WorkloadAnnotations: append([]string{plan.RecordAnnotation, plan.HashKeyAnnotation, plan.VersionAnnotation}, optin.WorkloadKeys...)})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = st.Start(ctx) }()
	if !toolscache.WaitForCacheSync(ctx.Done(), st.HasSynced) {
		t.Fatal("store did not sync")
	}
	e := &jobEnv{writes: map[string]int{}}
	e.server = interceptor.NewClient(fake.NewClientBuilder().WithObjects(objs...).Build(), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := ctx.Err(); err != nil { // as a real client: a cancelled request is not sent
				return err
			}
			o := &client.CreateOptions{}
			o.ApplyOptions(opts)
			e.count("create", obj, len(o.DryRun) > 0)
			return c.Create(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			e.count("delete", obj, false)
			err := c.Delete(ctx, obj, opts...)
			if e.afterDelete != nil {
				e.afterDelete()
			}
			return err
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			e.count("patch", obj, false)
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	s := settings.Settings{Annotation: "require-restart", Discovery: discovery}
	e.r = New(st, e.server, e.server, events.NewFakeRecorder(100),
		Config{Settings: s, Hasher: jobHasher, Strategy: restart.Default, Namespace: "watcher"})
	return e
}

// job reads the Job ns/name from the API server; nil when there is none.
func (e *jobEnv) job(t *testing.T, ns, name string) *batchv1.Job {
	t.Helper()
	j := &batchv1.Job{}
	if err := e.server.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, j); err != nil {
		return nil
	}
	return j
}

// testRecord is the record of a workload reading every key of ConfigMap
// ns/cfg, made when its key "a" was value.
func testRecord(ns, value string) string {
	src := hash.Source{Kind: "ConfigMap", Namespace: ns, Name: "cfg"}
	return plan.Record{"ConfigMap/cfg": &plan.Entry{All: true, Keys: jobHasher.Of(src, map[string][]byte{"a": []byte(value)}).Keys}}.String()
}

// testPodSpec reads every key of ConfigMap cfg.
func testPodSpec() corev1.PodSpec {
	return corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "app", Image: "migrate:1",
		EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}}}
}

// testMeta is metadata with a fixed resourceVersion, so that the store
// and the API server agree.
func testMeta(ns, name string, annotations map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "7", UID: types.UID("uid-" + name), Annotations: annotations, Generation: 1}
}

// recordedJob is a Job of ns reading ConfigMap cfg, recorded when cfg's
// "a" was "v1", with annotations (besides the record) and finalizers.
func recordedJob(ns, name string, annotations map[string]string, finalizers ...string) *batchv1.Job {
	a := map[string]string{plan.RecordAnnotation: testRecord(ns, "v1"), plan.HashKeyAnnotation: jobHasher.ID()}
	for k, v := range annotations {
		a[k] = v
	}
	meta := testMeta(ns, name, a)
	meta.Finalizers = finalizers
	return &batchv1.Job{ObjectMeta: meta, Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: testPodSpec()}}}
}

// changedConfigMap is ConfigMap ns/cfg with "a" changed to "v2".
func changedConfigMap(ns string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: testMeta(ns, "cfg", nil), Data: map[string]string{"a": "v2"}}
}

// finished marks j as a Job that ran to completion.
func finished(j *batchv1.Job) *batchv1.Job {
	j.Status = batchv1.JobStatus{Succeeded: 1, CompletionTime: ptr.To(metav1.NewTime(time.Unix(1e9, 0))),
		Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}
	return j
}

var optIn = map[string]string{optin.ReloaderAuto: "true"}

// TestJobFinalizerDoesNotHoldWorker: a Job that opts in and carries a
// finalizer of its tenant's is deleted, and the reconcile returns at once
// (the re-creation is pending, the restart made); its Job is reconciled
// again and again (the tenant touches it every second) with no delete and
// no request within its backoff; once the tenant's finalizer goes, the
// next reconcile of the Job creates it, once, and the record is gone.
func TestJobFinalizerDoesNotHoldWorker(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns = "tenant-a"
	e := newJobEnv(t, ctx, plan.DiscoveryAll, recordedJob(ns, "migrate", optIn, "tenant.example.com/keep"), changedConfigMap(ns))
	key := workload.Key{Kind: "Job", Namespace: ns, Name: "migrate"}

	start := time.Now()
	p, err := e.r.reconcileWorkload(ctx, key)
	if err != nil || p.Action != plan.Restart {
		t.Fatalf("reconcileWorkload() = %v, %v; want a restart", p.Action, err)
	}
	if held := time.Since(start); held > 2*time.Second {
		t.Errorf("the reconcile held its worker %s", held)
	}
	if j := e.job(t, ns, "migrate"); j == nil || j.DeletionTimestamp == nil {
		t.Fatalf("the Job is not being deleted: %+v", j)
	}
	for range 5 { // touched: reconciled again
		res, err := e.r.Reconcile(ctx, Workload{key})
		if err != nil || res.RequeueAfter <= 0 || res.RequeueAfter > restart.Backoff(0) {
			t.Errorf("Reconcile() = %+v, %v; want a requeue within the backoff", res, err)
		}
	}
	if n := e.sent("delete Job"); n != 1 {
		t.Errorf("%d deletes sent, want 1", n)
	}
	if n := e.sent("create Job"); n != 0 {
		t.Errorf("%d Jobs created while the old one is being deleted", n)
	}

	// The tenant removes the finalizer: the old Job goes.
	cur := e.job(t, ns, "migrate")
	cur.Finalizers = nil
	if err := e.server.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	time.Sleep(restart.Backoff(0)) // the backoff of the next look
	if _, err := e.r.Reconcile(ctx, Workload{key}); err != nil {
		t.Fatal(err)
	}
	j := e.job(t, ns, "migrate")
	if j == nil || j.UID == "uid-migrate" || j.Annotations[plan.RecordAnnotation] != testRecord(ns, "v2") {
		t.Fatalf("the Job is not re-created with the new record: %+v", j)
	}
	if e.sent("create Job") != 1 || e.r.recreations.Known(types.NamespacedName{Namespace: ns, Name: "migrate"}) {
		t.Errorf("created %d times; re-creation still known", e.sent("create Job"))
	}
	var records corev1.ConfigMapList
	if err := e.server.List(ctx, &records, client.InNamespace("watcher")); err != nil || len(records.Items) != 0 {
		t.Errorf("records left: %d (%v)", len(records.Items), err)
	}
}

// TestJobBeingDeletedIsNotRestarted: a Job already being deleted (by its
// tenant) is neither deleted nor created by a change.
func TestJobBeingDeletedIsNotRestarted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns = "tenant-a"
	j := recordedJob(ns, "migrate", optIn, "tenant.example.com/keep")
	j.DeletionTimestamp = ptr.To(metav1.Now())
	e := newJobEnv(t, ctx, plan.DiscoveryAll, j, changedConfigMap(ns))
	key := workload.Key{Kind: "Job", Namespace: ns, Name: "migrate"}
	for range 3 {
		if _, err := e.r.reconcileWorkload(ctx, key); err != nil {
			t.Fatal(err)
		}
		if _, err := e.r.Reconcile(ctx, Workload{key}); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.sent("delete Job") + e.sent("create Job") + e.sent("create (dry-run) Job") + e.sent("create ConfigMap"); n != 0 {
		t.Errorf("%d writes sent for a Job being deleted", n)
	}
}

// TestJobRecreatedWhenStopping: watcher is told to stop (the reconcile's
// context cancelled) as the delete is answered: the Job is created all
// the same.
func TestJobRecreatedWhenStopping(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns = "tenant-a"
	e := newJobEnv(t, ctx, plan.DiscoveryAll, recordedJob(ns, "migrate", optIn), changedConfigMap(ns))
	rctx, stop := context.WithCancel(ctx)
	e.afterDelete = stop
	if _, err := e.r.reconcileWorkload(rctx, workload.Key{Kind: "Job", Namespace: ns, Name: "migrate"}); err != nil {
		t.Fatal(err)
	}
	j := e.job(t, ns, "migrate")
	if j == nil || j.UID == "uid-migrate" || len(j.Finalizers) != 0 {
		t.Fatalf("the Job is not re-created: %+v", j)
	}
}

// TestFinishedJobRunsAgainOnlyByItsOwnOptIn: a finished Job (not a
// controller's) is re-created only when it opts in on its own metadata;
// one that opts in through its pod template only is not run again, and
// its record is removed. A running one is re-created either way.
func TestFinishedJobRunsAgainOnlyByItsOwnOptIn(t *testing.T) {
	for _, tt := range []struct {
		name      string
		own       bool // opts in on its metadata, else on its pod template
		done      bool
		recreated bool
	}{
		{"finished, own metadata: run again", true, true, true},
		{"finished, pod template: not run again", false, true, false},
		{"running, pod template: re-created", false, false, true},
		{"running, own metadata: re-created", true, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			const ns = "tenant-a"
			j := recordedJob(ns, "migrate", nil)
			if tt.own {
				j.Annotations[optin.ReloaderAuto] = "true"
			} else {
				j.Spec.Template.Annotations = optIn
			}
			if tt.done {
				finished(j)
			}
			e := newJobEnv(t, ctx, plan.DiscoveryAll, j, changedConfigMap(ns))
			if _, err := e.r.reconcileWorkload(ctx, workload.Key{Kind: "Job", Namespace: ns, Name: "migrate"}); err != nil {
				t.Fatal(err)
			}
			cur := e.job(t, ns, "migrate")
			if got := cur.UID != "uid-migrate"; got != tt.recreated {
				t.Errorf("re-created: %v, want %v", got, tt.recreated)
			}
			if !tt.recreated {
				if e.sent("delete Job") != 0 || cur.Status.CompletionTime == nil {
					t.Error("the finished Job was deleted")
				}
				if _, ok := cur.Annotations[plan.RecordAnnotation]; ok {
					t.Error("the record of a Job that does not opt in is kept")
				}
			}
		})
	}
}

// TestCronJobRunsAreTheCronJobs: a CronJob opts in in one of the three
// places it can; its retained finished run (a Job the CronJob controls,
// carrying what the jobTemplate gave it) is never deleted nor created
// again, whatever the discovery mode: the CronJob is what restarts, when
// its own opt-in counts (its metadata or its pod template, as in
// Reloader; jobTemplate.metadata reaches only its Jobs).
func TestCronJobRunsAreTheCronJobs(t *testing.T) {
	for _, tt := range []struct {
		where     string
		discovery string
		restarted bool // the CronJob
	}{
		{"metadata", plan.DiscoveryAnnotated, true},
		{"jobTemplate.metadata", plan.DiscoveryAnnotated, false},
		{"pod template", plan.DiscoveryAnnotated, true},
		{"metadata", plan.DiscoveryAll, true},
		{"jobTemplate.metadata", plan.DiscoveryAll, true},
		{"pod template", plan.DiscoveryAll, true},
	} {
		t.Run(tt.where+" "+tt.discovery, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			const ns = "tenant-a"
			cj := &batchv1.CronJob{ObjectMeta: testMeta(ns, "backup", map[string]string{
				plan.RecordAnnotation: testRecord(ns, "v1"), plan.HashKeyAnnotation: jobHasher.ID()}),
				Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *", ConcurrencyPolicy: batchv1.ForbidConcurrent,
					SuccessfulJobsHistoryLimit: ptr.To[int32](3),
					JobTemplate:                batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: testPodSpec()}}}}}
			switch tt.where {
			case "metadata":
				cj.Annotations[optin.ReloaderAuto] = "true"
			case "jobTemplate.metadata":
				cj.Spec.JobTemplate.Annotations = optIn
			case "pod template":
				cj.Spec.JobTemplate.Spec.Template.Annotations = optIn
			}
			// The run as the CronJob controller makes it: the jobTemplate's
			// metadata and spec, the CronJob its controller; finished, and
			// adopted by an earlier watcher.
			run := recordedJob(ns, "backup-29000000", cj.Spec.JobTemplate.Annotations)
			run.Spec = *cj.Spec.JobTemplate.Spec.DeepCopy()
			run.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: "backup", UID: cj.UID, Controller: ptr.To(true)}}
			finished(run)
			e := newJobEnv(t, ctx, tt.discovery, cj, run, changedConfigMap(ns))

			for range 2 { // a change, then the Job's next event
				if _, err := e.r.reconcileWorkload(ctx, workload.Key{Kind: "Job", Namespace: ns, Name: run.Name}); err != nil {
					t.Fatal(err)
				}
			}
			if e.sent("delete Job")+e.sent("create Job")+e.sent("create (dry-run) Job") != 0 {
				t.Errorf("the CronJob's run was re-created: %v", e.writes)
			}
			if cur := e.job(t, ns, run.Name); cur == nil || cur.UID != run.UID || cur.Status.CompletionTime == nil {
				t.Errorf("the CronJob's finished run is not as it was: %+v", cur)
			}
			p, err := e.r.reconcileWorkload(ctx, workload.Key{Kind: "CronJob", Namespace: ns, Name: "backup"})
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Action == plan.Restart; got != tt.restarted {
				t.Errorf("CronJob restarted: %v, want %v", got, tt.restarted)
			}
			if e.sent("create Job") != 0 {
				t.Error("a Job was created (the trigger is off)")
			}
		})
	}
}
