package install

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/trigger"
	"github.com/watcher-dev/watcher/internal/workload"
	"github.com/watcher-dev/watcher/test/fixture"
)

// jobsRefused is what the admission policy answers for a Job watcher does
// not make.
const jobsRefused = "watcher may create only Jobs shaped as it makes them"

// recreatedFrom marks a re-created Job with the UID of the Job it
// replaces (the Job re-creation kept in the cluster, issue 28).
const recreatedFrom = "watcher.dev/recreated-from"

// jobShapes checks the admission policy of a release whose ServiceAccount
// ns/sa may create Jobs in namespace apps (RBAC): the Jobs watcher makes,
// built by watcher's own code (trigger.JobName for the CronJob trigger's;
// restart.Patch of each strategy and restart.RecreatedJob for a Job
// re-created), are admitted; Jobs that carry watcher's record or a
// CronJob's mark but are shaped otherwise are refused. Every create is a
// dry run, as watcher's ServiceAccount.
func jobShapes(t *testing.T, ns, sa, apps string) {
	t.Helper()
	spec := fixture.CronJob(apps, "x", fixture.EnvFrom("cfg", "")).Spec.JobTemplate.Spec
	const id = "0123456789abcdef" // a restart ID: 16 hex digits
	long := strings.Repeat("n", 60)

	triggered := func(cronJob, name string, edit func(*batchv1.Job)) *batchv1.Job {
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: name,
			Annotations: map[string]string{trigger.InstantiateAnnotation: "manual"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: cronJob,
				UID: "8d5c2f1e-0000-4000-8000-000000000001", Controller: ptr.To(true)}}},
			Spec: *spec.DeepCopy()}
		if edit != nil {
			edit(job)
		}
		return job
	}
	// The Job a restart deletes, as read from the API server.
	old := func(edit func(*batchv1.Job)) *batchv1.Job {
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "migrate", UID: "8d5c2f1e-0000-4000-8000-000000000002",
			ResourceVersion: "7", Annotations: map[string]string{"reloader.stakater.com/auto": "true"}}, Spec: *spec.DeepCopy()}
		if edit != nil {
			edit(job)
		}
		return job
	}
	// The Job that replaces it, as the controller builds it: the record
	// annotations and the strategy's change, applied by RecreatedJob.
	recreated := func(s restart.Strategy, old *batchv1.Job) *batchv1.Job {
		pt, change := restart.Patch(s, restart.Workload{Kind: workload.Job, Object: old, ID: id})
		patch := map[string]any{"metadata": map[string]any{"annotations": map[string]string{
			plan.RecordAnnotation:  `{"ConfigMap/cfg":{"all":true,"keys":{"a":"5f1e"}}}`,
			plan.HashKeyAnnotation: "k1", plan.VersionAnnotation: "7/" + id,
		}}}
		for k, v := range change {
			patch[k] = v
		}
		b, err := json.Marshal(patch)
		if err != nil {
			t.Fatal(err)
		}
		job, err := restart.RecreatedJob(old, pt, b)
		if err != nil {
			t.Fatal(err)
		}
		return job
	}
	ownedBy := func(kind string) func(*batchv1.Job) {
		return func(j *batchv1.Job) {
			j.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: kind, Name: "nightly",
				UID: "8d5c2f1e-0000-4000-8000-000000000003", Controller: ptr.To(true)}}
		}
	}

	for _, tc := range []struct {
		name string
		job  *batchv1.Job
	}{
		{"a Job carrying watcher's record alone", &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "record-only",
			Annotations: map[string]string{plan.RecordAnnotation: `{"ConfigMap/cfg":{"all":true}}`}}, Spec: *spec.DeepCopy()}},
		{"a re-created Job without the restart's mark", func() *batchv1.Job {
			j := recreated(restart.Annotation{}, old(nil))
			delete(j.Spec.Template.Annotations, plan.RestartAnnotation)
			return j
		}()},
		{"a re-created Job with a mark that is no restart ID", func() *batchv1.Job {
			j := recreated(restart.Annotation{}, old(nil))
			j.Spec.Template.Annotations[plan.RestartAnnotation] = "now"
			return j
		}()},
		{"a re-created Job without the hash key annotation", func() *batchv1.Job {
			j := recreated(restart.Annotation{}, old(nil))
			delete(j.Annotations, plan.HashKeyAnnotation)
			return j
		}()},
		{"a re-created Job marked as the copy of no Job", func() *batchv1.Job {
			j := recreated(restart.Annotation{}, old(nil))
			j.Annotations[recreatedFrom] = "migrate"
			return j
		}()},
		{"a re-created Job a CronJob controls", recreated(restart.Annotation{}, old(ownedBy("CronJob")))},
		{"a re-created Job another controller controls", recreated(restart.Annotation{}, old(ownedBy("Workflow")))},
		{"a CronJob's Job under another name", triggered("nightly", "nightly-now", nil)},
		{"a Job named as the trigger's, of another CronJob", triggered("weekly", trigger.JobName("nightly", id), nil)},
		{"a CronJob's Job without cronjob.kubernetes.io/instantiate", triggered("nightly", trigger.JobName("nightly", id), func(j *batchv1.Job) {
			j.Annotations = nil
		})},
		{"a CronJob's Job that blocks its owner's deletion", triggered("nightly", trigger.JobName("nightly", id), func(j *batchv1.Job) {
			j.OwnerReferences[0].BlockOwnerDeletion = ptr.To(true)
		})},
		{"a CronJob's Job with a second owner", triggered("nightly", trigger.JobName("nightly", id), func(j *batchv1.Job) {
			j.OwnerReferences = append(j.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "cfg", UID: "8d5c2f1e-0000-4000-8000-000000000004"})
		})},
	} {
		t.Run("refused: "+tc.name, func(t *testing.T) { refused(t, ns, sa, tc.job, jobsRefused) })
	}

	for _, tc := range []struct {
		name string
		job  *batchv1.Job
	}{
		{"the CronJob trigger's Job", triggered("nightly", trigger.JobName("nightly", id), nil)},
		{"the CronJob trigger's Job of a CronJob with a long name", triggered(long, trigger.JobName(long, id), nil)},
		{"a Job re-created, strategy annotation", recreated(restart.Annotation{}, old(nil))},
		{"a Job re-created, strategy env", recreated(restart.Env{}, old(nil))},
		{"a Job re-created, strategy restarted-at", recreated(restart.RestartedAt{}, old(nil))},
		{"a Job re-created, strategy evict", recreated(restart.Evict{}, old(nil))},
		{"a Job re-created with an owner that controls nothing", recreated(restart.Annotation{}, old(func(j *batchv1.Job) {
			j.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "cfg", UID: "8d5c2f1e-0000-4000-8000-000000000005"}}
		}))},
		{"a Job re-created, marked as the copy of the Job it replaces", func() *batchv1.Job {
			j := recreated(restart.Annotation{}, old(nil))
			j.Annotations[recreatedFrom] = "8d5c2f1e-0000-4000-8000-000000000002"
			return j
		}()},
		{"the dry run of a re-created Job under a generated name", func() *batchv1.Job {
			j := recreated(restart.Annotation{}, old(nil))
			j.GenerateName, j.Name = j.Name+"-", ""
			return j
		}()},
	} {
		t.Run("admitted: "+tc.name, func(t *testing.T) {
			NewWithT(t).Expect(as(t, ns, sa).Create(ctx, tc.job, client.DryRunAll)).To(Succeed())
		})
	}
}

// as returns a client that impersonates the ServiceAccount ns/sa, with
// its groups.
func as(t *testing.T, ns, sa string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(kube.RESTConfig())
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// refused creates obj (a dry run) as the ServiceAccount ns/sa and expects
// the admission policy's refusal saying want (it may take a moment to be
// in force after the install).
func refused(t *testing.T, ns, sa string, obj client.Object, want string) {
	t.Helper()
	c := as(t, ns, sa)
	NewWithT(t).Eventually(func() error {
		return c.Create(ctx, obj.DeepCopyObject().(client.Object), client.DryRunAll)
	}, wait, 200*time.Millisecond).Should(MatchError(And(ContainSubstring("ValidatingAdmissionPolicy"), ContainSubstring(want))),
		"%T %s/%s created by %s", obj, obj.GetNamespace(), obj.GetName(), sa)
}
