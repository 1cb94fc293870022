package e2e

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/test/fixture"
)

// TestJobRecreatedAfterItRan: a Job that opted in with Reloader's
// annotation and ran to completion (the job controller, kwok's
// pod-complete stage) is, when its ConfigMap changes, deleted with its
// pods and created again, as Reloader does: the new Job, same name, new
// UID, runs its one pod, with the new template, to completion too.
func TestJobRecreatedAfterItRan(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	cm := fixture.ConfigMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	spec := fixture.EnvFrom("cfg", "")
	spec.RestartPolicy = corev1.RestartPolicyNever
	j := &batchv1.Job{ObjectMeta: fixture.Meta(ns, "migrate"), Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: spec}}}
	j.Annotations = map[string]string{optin.ReloaderAuto: "true"}
	create(t, j)
	first := waitJobSucceeded(t, ns, "migrate", "")
	startWatcher(t, "watcher", ns)
	waitAdopted(t, j)

	setData(t, cm, "a", "2")
	second := waitJobSucceeded(t, ns, "migrate", first)
	waitRestarted(t, ns, "migrate", "ConfigMap cfg changed (keys: a;")
	g.Eventually(func() []types.UID {
		var pods corev1.PodList
		g.Expect(k8s.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
		var owners []types.UID
		for _, p := range pods.Items {
			owners = append(owners, types.UID(p.Labels[batchv1.ControllerUidLabel]))
		}
		return owners
	}, wait, 200*time.Millisecond).Should(Equal([]types.UID{second}), "the old Job's pod is gone with it; the new Job has one")
}

// waitJobSucceeded waits until the Job name of ns, with another UID than
// not, succeeded, with one pod that ran its current template, and returns
// its UID.
func waitJobSucceeded(t *testing.T, ns, name string, not types.UID) types.UID {
	t.Helper()
	var uid types.UID
	NewWithT(t).Eventually(func(g Gomega) {
		job := &batchv1.Job{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, job)).To(Succeed())
		g.Expect(job.UID).NotTo(Equal(not), "a new Job")
		g.Expect(job.Status.Succeeded).To(Equal(int32(1)), "Job %s succeeded", name)
		var pods corev1.PodList
		g.Expect(k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{batchv1.ControllerUidLabel: string(job.UID)})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1))
		p := pods.Items[0]
		g.Expect(p.Status.Phase).To(Equal(corev1.PodSucceeded), "pod %s", p.Name)
		if id := job.Spec.Template.Annotations[plan.RestartAnnotation]; id != "" {
			g.Expect(p.Annotations[plan.RestartAnnotation]).To(Equal(id), "pod %s runs the new template", p.Name)
		}
		uid = job.UID
	}, wait, 200*time.Millisecond).Should(Succeed(), "Job %s/%s", ns, name)
	return uid
}
