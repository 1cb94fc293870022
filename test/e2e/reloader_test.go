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
	"github.com/watcher-dev/watcher/test/fixture"
	"github.com/watcher-dev/watcher/test/observe"
)

// TestReloaderManifests: a set of manifests written for Reloader, unedited,
// under the built binary with DISCOVERY=annotated, rolls exactly what
// Reloader would roll, once per change: auto (and its typed form), a reload
// list naming a ConfigMap the pod spec does not use, search/match, an
// exclude list, an ignored ConfigMap, and a workload with no annotation;
// a Job named by its template's reload list is re-created once, and one
// with no annotation is left alone.
func TestReloaderManifests(t *testing.T) {
	ns := namespace(t)
	cmA := fixture.ConfigMap(ns, "cm-a", map[string]string{"k": "1"})
	cmB := fixture.ConfigMap(ns, "cm-b", map[string]string{"k": "1"})
	cmM := fixture.ConfigMap(ns, "cm-m", map[string]string{"k": "1"})
	cmM.Annotations = map[string]string{optin.Match: "true"}
	cmI := fixture.ConfigMap(ns, "cm-i", map[string]string{"k": "1"})
	cmI.Annotations = map[string]string{optin.Ignore: "true"}
	secA := fixture.Secret(ns, "sec-a", map[string]string{"s": "1"})
	create(t, cmA, cmB, cmM, cmI, secA)

	uses := func(names ...string) corev1.PodSpec {
		var from []corev1.EnvFromSource
		for _, n := range names {
			if n == "sec-a" {
				from = append(from, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: n}}})
				continue
			}
			from = append(from, corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: n}}})
		}
		return fixture.PodSpec(corev1.Container{EnvFrom: from})
	}
	workloads := []struct {
		name        string
		spec        corev1.PodSpec
		annotations map[string]string
		want        int // rollouts after the five changes below, as under Reloader
	}{
		{"auto", uses("cm-a", "sec-a", "cm-i"), map[string]string{optin.ReloaderAuto: "true"}, 2},
		{"typed", uses("cm-a", "sec-a"), map[string]string{optin.ConfigMapAuto: "true"}, 1},
		{"named", uses(), map[string]string{optin.ConfigMapReload: "cm-b"}, 1},
		{"search", uses("cm-a", "cm-m"), map[string]string{optin.Search: "true"}, 1},
		{"excluded", uses("cm-a", "sec-a"), map[string]string{optin.ReloaderAuto: "true", optin.ConfigMapExclude: "cm-a"}, 1},
		{"plain", uses("cm-a", "sec-a"), nil, 0},
	}
	var objs []client.Object
	var trs []*observe.Tracker
	for _, w := range workloads {
		d := fixture.Deployment(ns, w.name, w.spec)
		d.Annotations = w.annotations
		objs = append(objs, d)
		trs = append(trs, track(t, d))
	}
	// Jobs: one named by its reload list is re-created once, as Reloader
	// does; one with no annotation is left alone. The list is on the
	// Job's own metadata: kwok finishes the Job's pod at once, and a
	// finished Job that opted in only through its pod template (as a
	// CronJob's runs inherit it) is not run again.
	jobSpec := uses("cm-a")
	jobSpec.RestartPolicy = corev1.RestartPolicyNever
	namedJob := &batchv1.Job{ObjectMeta: fixture.Meta(ns, "named-job"), Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: jobSpec}}}
	namedJob.Annotations = map[string]string{optin.ConfigMapReload: "cm-b"}
	plainJob := &batchv1.Job{ObjectMeta: fixture.Meta(ns, "plain-job"), Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: *jobSpec.DeepCopy()}}}
	create(t, namedJob, plainJob)
	namedUID, plainUID := get(t, namedJob).UID, get(t, plainJob).UID
	w := startWatcherEnv(t, "watcher", ns, []string{"DISCOVERY=annotated"})
	w.WaitReady(t)
	waitAdopted(t, namedJob)
	for i, o := range objs {
		if workloads[i].want > 0 {
			waitAdopted(t, o)
		}
	}

	setData(t, cmA, "k", "2")
	// Two changes a workload uses, made within the debounce, roll it once
	// (watcher's --coalesce): one at a time, as Reloader counts them.
	waitRollouts(t, trs[0], 1)
	setData(t, secA, "s", "2")
	setData(t, cmB, "k", "2")
	setData(t, cmM, "k", "2")
	setData(t, cmI, "k", "2")
	for i, wl := range workloads {
		waitRollouts(t, trs[i], wl.want)
	}
	for i, wl := range workloads {
		stayRollouts(t, trs[i], wl.want, time.Second)
	}
	waitRestarted(t, ns, "named", "ConfigMap cm-b changed")
	waitRestarted(t, ns, "named-job", "ConfigMap cm-b changed")
	g := NewWithT(t)
	recreated := get(t, &batchv1.Job{ObjectMeta: fixture.Meta(ns, "named-job")}).UID
	g.Expect(recreated).NotTo(Equal(namedUID), "the named Job is re-created")
	g.Consistently(func() []types.UID {
		return []types.UID{get(t, &batchv1.Job{ObjectMeta: fixture.Meta(ns, "named-job")}).UID, get(t, &batchv1.Job{ObjectMeta: fixture.Meta(ns, "plain-job")}).UID}
	}, time.Second).Should(Equal([]types.UID{recreated, plainUID}), "once, and the plain Job never")
}
