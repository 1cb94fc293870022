package integration

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/plan"
)

// annotated returns a Deployment running spec, with annotations.
func annotated(ns, name string, spec corev1.PodSpec, annotations map[string]string) *appsv1.Deployment {
	d := deployment(ns, name, spec)
	d.Annotations = annotations
	return d
}

// discoverAnnotated runs watcher in the annotated discovery mode.
func discoverAnnotated(o *options.Options) { o.Discovery = plan.DiscoveryAnnotated }

// recorded tells whether watcher wrote a record on the Deployment name.
func recorded(t *testing.T, ns, name string) bool {
	_, ok := fetch(t, deployment(ns, name, corev1.PodSpec{})).Annotations[plan.RecordAnnotation]
	return ok
}

// TestReloaderAnnotatedDiscovery: with --discovery=annotated only workloads
// that opt in are restarted, each for the kinds it opts in to; the others
// are never written.
func TestReloaderAnnotatedDiscovery(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	sec := secret(ns, "sec", map[string]string{"s": "1"})
	create(t, cm, sec)
	spec := envFrom("cfg", "sec")
	auto := track(t, annotated(ns, "auto", spec, map[string]string{optin.ReloaderAuto: "true"}))
	own := track(t, annotated(ns, "own", spec, map[string]string{optin.Auto: "true"}))
	typed := track(t, annotated(ns, "typed", spec, map[string]string{optin.ConfigMapAuto: "true"}))
	plain := track(t, deployment(ns, "plain", spec))
	w := startWatcher(t, ns, discoverAnnotated)
	for _, name := range []string{"auto", "own", "typed"} {
		waitAdopted(t, deployment(ns, name, corev1.PodSpec{}))
	}

	setConfigMap(t, cm, "a", "2")
	waitRollouts(t, auto, 1)
	waitRollouts(t, own, 1)
	waitRollouts(t, typed, 1)
	waitLog(t, w, "Deployment "+ns+"/plain", plan.SkipNotOptedIn)

	setSecret(t, sec, "s", "2")
	waitRollouts(t, auto, 2)
	waitRollouts(t, own, 2)
	stayRollouts(t, typed, 1) // opted in to ConfigMaps only
	stayRollouts(t, plain, 0)
	NewWithT(t).Expect(recorded(t, ns, "plain")).To(BeFalse(), "a workload that does not opt in is never written")
}

// TestReloaderAutoFalse: reloader.stakater.com/auto: "false" (and
// watcher.dev/auto) opts a workload out in the default mode, and its record
// is removed.
func TestReloaderAutoFalse(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	off := track(t, annotated(ns, "off", envFrom("cfg", ""), map[string]string{optin.ReloaderAuto: "false"}))
	ownOff := track(t, annotated(ns, "own-off", envFrom("cfg", ""), map[string]string{optin.Auto: "false"}))
	on := track(t, deployment(ns, "on", envFrom("cfg", "")))
	w := startWatcher(t, ns)
	waitAdopted(t, deployment(ns, "on", corev1.PodSpec{}))

	setConfigMap(t, cm, "a", "2")
	waitRollouts(t, on, 1)
	waitLog(t, w, "Deployment "+ns+"/off", plan.SkipAutoDisabled)
	stayRollouts(t, off, 0)
	stayRollouts(t, ownOff, 0)
	NewWithT(t).Expect(recorded(t, ns, "off")).To(BeFalse())

	// Opting back in adopts the current state; the next change restarts.
	edit(t, deployment(ns, "on", corev1.PodSpec{}), func(d *appsv1.Deployment) {
		d.Annotations[optin.ReloaderAuto] = "false"
	})
	NewWithT(t).Eventually(func() bool { return recorded(t, ns, "on") }, wait).Should(BeFalse(), "record removed")
	edit(t, deployment(ns, "off", corev1.PodSpec{}), func(d *appsv1.Deployment) { d.Annotations[optin.ReloaderAuto] = "true" })
	waitAdopted(t, deployment(ns, "off", corev1.PodSpec{}))
	setConfigMap(t, cm, "a", "3")
	waitRollouts(t, off, 1)
	stayRollouts(t, on, 1)
}

// TestReloaderIgnore: reloader.stakater.com/ignore: "true" on a ConfigMap
// makes its changes restart nothing; the Secret still restarts.
func TestReloaderIgnore(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	cm.Annotations = map[string]string{optin.Ignore: "true"}
	sec := secret(ns, "sec", map[string]string{"s": "1"})
	create(t, cm, sec)
	dep := track(t, annotated(ns, "web", envFrom("cfg", "sec"), map[string]string{optin.ReloaderAuto: "true"}))
	w := startWatcher(t, ns, discoverAnnotated)
	waitAdopted(t, deployment(ns, "web", corev1.PodSpec{}))

	setConfigMap(t, cm, "a", "2")
	waitLog(t, w, "ConfigMap "+ns+"/cfg", plan.SkipConfigIgnored)
	stayRollouts(t, dep, 0)
	setSecret(t, sec, "s", "2")
	waitRollouts(t, dep, 1)
	waitRestarted(t, ns, "web", "Secret sec changed")
}

// TestReloaderReloadList: a ConfigMap named by a reload list restarts the
// workload although its pod spec does not use it; one named by a pattern
// does when the pod spec uses it.
func TestReloaderReloadList(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	settings := configMap(ns, "settings", map[string]string{"a": "1"})
	used := configMap(ns, "app-used", map[string]string{"a": "1"})
	other := configMap(ns, "other", map[string]string{"a": "1"})
	create(t, settings, used, other)
	dep := track(t, annotated(ns, "web", envFrom("other", ""), map[string]string{
		optin.ConfigMapReload: "settings, app-.*",
	}))
	w := startWatcher(t, ns, discoverAnnotated)
	waitAdopted(t, deployment(ns, "web", corev1.PodSpec{}))

	setConfigMap(t, settings, "a", "2")
	waitRollouts(t, dep, 1)
	waitRestarted(t, ns, "web", "ConfigMap settings changed (keys: a;")
	// other is used by the pod spec but not named: annotated mode ignores it.
	setConfigMap(t, other, "a", "2")
	waitLog(t, w, "Deployment "+ns+"/web", plan.SkipNotOptedIn)
	stayRollouts(t, dep, 1)

	// A pattern counts for what the pod spec uses.
	edit(t, deployment(ns, "web", corev1.PodSpec{}), func(d *appsv1.Deployment) { d.Spec.Template.Spec = envFrom("app-used", "") })
	waitRollouts(t, dep, 2) // the template edit itself
	NewWithT(t).Eventually(func() string {
		return fetch(t, deployment(ns, "web", corev1.PodSpec{})).Annotations[plan.RecordAnnotation]
	}, wait).Should(ContainSubstring("app-used"))
	setConfigMap(t, used, "a", "2")
	waitRollouts(t, dep, 3)
	stayRollouts(t, dep, 3)
}

// TestReloaderInvalidRegex: an invalid entry of a reload list is reported
// (log, Warning Event, metric); the list's other entries, and the other
// workloads, still work.
func TestReloaderInvalidRegex(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	before := testutil.ToFloat64(metrics.Errors.WithLabelValues("annotation"))
	bad := track(t, annotated(ns, "bad", podSpec(corev1.Container{}), map[string]string{optin.ConfigMapReload: "(oops,cfg"}))
	good := track(t, annotated(ns, "good", envFrom("cfg", ""), map[string]string{optin.ReloaderAuto: "true"}))
	startWatcher(t, ns, discoverAnnotated)
	waitAdopted(t, deployment(ns, "good", corev1.PodSpec{}))
	waitAdopted(t, deployment(ns, "bad", corev1.PodSpec{}))

	g := NewWithT(t)
	g.Eventually(func() []string { return events(t, ns, "bad", "InvalidAnnotation") }, wait).Should(
		ContainElement(And(ContainSubstring(optin.ConfigMapReload), ContainSubstring("(oops"))))
	g.Expect(testutil.ToFloat64(metrics.Errors.WithLabelValues("annotation"))).To(BeNumerically(">", before))

	setConfigMap(t, cm, "a", "2")
	waitRollouts(t, good, 1)
	waitRollouts(t, bad, 1)
	waitRestarted(t, ns, "bad", "ConfigMap cfg changed")
}
