package integration

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/plan"
)

// TestReloaderPatternBeyondPodSpec: a reload-list pattern names every
// ConfigMap of the namespace it matches, whether the pod spec uses it or
// not, including one created after watcher started (recorded, then its
// change restarts); a ConfigMap it does not match restarts nothing.
func TestReloaderPatternBeyondPodSpec(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	a := configMap(ns, "app-a", map[string]string{"k": "1"})
	other := configMap(ns, "other", map[string]string{"k": "1"})
	create(t, a, other)
	dep := track(t, annotated(ns, "web", podSpec(corev1.Container{}), map[string]string{optin.ConfigMapReload: "app-.*"}))
	startWatcher(t, ns, discoverAnnotated)
	waitAdopted(t, deployment(ns, "web", corev1.PodSpec{}))

	setConfigMap(t, a, "k", "2")
	waitRollouts(t, dep, 1)

	b := configMap(ns, "app-b", map[string]string{"k": "1"})
	create(t, b)
	NewWithT(t).Eventually(func() string {
		return fetch(t, deployment(ns, "web", corev1.PodSpec{})).Annotations[plan.RecordAnnotation]
	}, wait).Should(ContainSubstring("ConfigMap/app-b"), "a new matching ConfigMap is recorded")
	stayRollouts(t, dep, 1)
	setConfigMap(t, b, "k", "2")
	waitRollouts(t, dep, 2)

	setConfigMap(t, other, "k", "2")
	stayRollouts(t, dep, 2)
}

// TestReloaderExcludeAndSearch: an exclude list wins over auto; search on
// the workload restarts for the objects annotated match, and only those.
func TestReloaderExcludeAndSearch(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cfg := configMap(ns, "cfg", map[string]string{"k": "1"})
	matched := configMap(ns, "matched", map[string]string{"k": "1"})
	matched.Annotations = map[string]string{optin.Match: "true"}
	sec := secret(ns, "sec", map[string]string{"s": "1"})
	create(t, cfg, matched, sec)
	excluding := track(t, annotated(ns, "excluding", envFrom("cfg", "sec"), map[string]string{
		optin.ReloaderAuto: "true", optin.ConfigMapExclude: "other, cfg",
	}))
	spec := envFrom("cfg", "")
	spec.Containers[0].EnvFrom = append(spec.Containers[0].EnvFrom, envFrom("matched", "").Containers[0].EnvFrom...)
	searching := track(t, annotated(ns, "searching", spec, map[string]string{optin.Search: "true"}))
	startWatcher(t, ns, discoverAnnotated)
	waitAdopted(t, deployment(ns, "excluding", corev1.PodSpec{}))
	waitAdopted(t, deployment(ns, "searching", corev1.PodSpec{}))

	setConfigMap(t, cfg, "k", "2")
	setSecret(t, sec, "s", "2")
	waitRollouts(t, excluding, 1) // the Secret
	stayRollouts(t, excluding, 1)
	stayRollouts(t, searching, 0) // cfg does not match

	setConfigMap(t, matched, "k", "2")
	waitRollouts(t, searching, 1)
	stayRollouts(t, searching, 1)
}

// TestReloaderTemplateAnnotations: as in Reloader, the annotations that opt
// in are read from the pod template when the workload has none.
func TestReloaderTemplateAnnotations(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "1"})
	create(t, cm)
	d := deployment(ns, "web", envFrom("cfg", ""))
	d.Spec.Template.Annotations = map[string]string{optin.ReloaderAuto: "true"}
	dep := track(t, d)
	plain := track(t, deployment(ns, "plain", envFrom("cfg", "")))
	startWatcher(t, ns, discoverAnnotated)
	waitAdopted(t, deployment(ns, "web", corev1.PodSpec{}))

	setConfigMap(t, cm, "k", "2")
	waitRollouts(t, dep, 1)
	stayRollouts(t, plain, 0)
	edit(t, deployment(ns, "web", corev1.PodSpec{}), func(d *appsv1.Deployment) {
		d.Annotations[optin.ReloaderAuto] = "false" // the workload's own wins
	})
	waitRollouts(t, dep, 1)
	NewWithT(t).Eventually(func() bool { return recorded(t, ns, "web") }, wait).Should(BeFalse())
}

// TestReloaderPausePeriod: with deployment.reloader.stakater.com/pause-period,
// the changes made within the period, counted from the first, roll out once,
// at its end, to the last content; a workload without it restarts at each.
func TestReloaderPausePeriod(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "1"})
	create(t, cm)
	paused := track(t, annotated(ns, "paused", envFrom("cfg", ""), map[string]string{optin.PausePeriod: "4s"}))
	plain := track(t, deployment(ns, "plain", envFrom("cfg", "")))
	startWatcher(t, ns)
	waitAdopted(t, deployment(ns, "paused", corev1.PodSpec{}))
	waitAdopted(t, deployment(ns, "plain", corev1.PodSpec{}))

	start := time.Now()
	for i := 2; i <= 4; i++ {
		setConfigMap(t, cm, "k", fmt.Sprint(i))
		waitRollouts(t, plain, i-1)
	}
	stayRollouts(t, paused, 0)
	waitRollouts(t, paused, 1)
	g := NewWithT(t)
	g.Expect(time.Since(start)).To(BeNumerically(">=", 3*time.Second), "the rollout waited for the period")
	stayRollouts(t, paused, 1)
	g.Expect(events(t, ns, "paused", "RestartWaiting")).To(ContainElement(ContainSubstring("pause period 4s")))
}

// TestReloaderMatchAddedLater: reloader.stakater.com/match added to a
// ConfigMap after the searching workload was adopted (a metadata-only
// change) makes it count: the workload records it then, without a restart,
// and its next data change restarts the workload.
func TestReloaderMatchAddedLater(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "1"})
	create(t, cm)
	dep := track(t, annotated(ns, "searching", envFrom("cfg", ""), map[string]string{optin.Search: "true"}))
	startWatcher(t, ns, discoverAnnotated)
	NewWithT(t).Consistently(func() bool { return recorded(t, ns, "searching") }, quiet).Should(BeFalse())

	edit(t, cm, func(c *corev1.ConfigMap) { c.Annotations = map[string]string{optin.Match: "true"} })
	NewWithT(t).Eventually(func() string {
		return fetch(t, deployment(ns, "searching", corev1.PodSpec{})).Annotations[plan.RecordAnnotation]
	}, wait).Should(ContainSubstring("ConfigMap/cfg"), "recorded once it matches")
	stayRollouts(t, dep, 0)
	setConfigMap(t, cm, "k", "2")
	waitRollouts(t, dep, 1)
}
