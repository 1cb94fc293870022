package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/test/observe"
)

// TestAdoptionThenDowntimeChange: installing watcher restarts nothing, and a
// change made while it was stopped is caught when it starts again, for every
// workload kind.
func TestAdoptionThenDowntimeChange(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	objs := []client.Object{
		deployment(ns, "dep", envFrom("cfg", "")),
		statefulSet(ns, "sts", envFrom("cfg", "")),
		daemonSet(ns, "ds", envFrom("cfg", "")),
	}
	var trs []*observe.Tracker
	for _, o := range objs {
		trs = append(trs, track(t, o))
	}
	w := startWatcher(t, ns)
	for i, o := range objs {
		waitAdopted(t, o)
		stayRollouts(t, trs[i], 0)
	}
	w.Stop()

	setConfigMap(t, cm, "a", "2")
	w = startWatcher(t, ns)
	for i, tr := range trs {
		waitRollouts(t, tr, 1)
		waitRestarted(t, ns, objs[i].GetName(), "ConfigMap cfg changed (keys: a;")
	}
	// A third start finds everything up to date.
	w.Stop()
	w = startWatcher(t, ns)
	for _, tr := range trs {
		stayRollouts(t, tr, 1)
	}
	NewWithT(t).Expect(restartLogs(w, "")).To(BeEmpty())
}

// TestRacingInstancesRestartOnce runs two watchers on the same namespace:
// every change rolls each workload exactly once, and only one of them says
// it restarted it.
func TestRacingInstancesRestartOnce(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "0"})
	create(t, cm)
	const workloads, changes = 5, 5
	var trs []*observe.Tracker
	for i := range workloads {
		trs = append(trs, track(t, deployment(ns, fmt.Sprintf("web-%d", i), envFrom("cfg", ""))))
	}
	// The same coalescing delay on both makes them act at the same moment.
	sameDelay := func(o *options.Options) { o.Coalesce = 100 * time.Millisecond }
	a, b := startWatcher(t, ns, sameDelay), startWatcher(t, ns, sameDelay)
	for i := range workloads {
		waitAdopted(t, deployment(ns, fmt.Sprintf("web-%d", i), corev1.PodSpec{}))
	}
	for c := 1; c <= changes; c++ {
		setConfigMap(t, cm, "a", fmt.Sprint(c))
		for _, tr := range trs {
			waitRollouts(t, tr, c)
		}
	}
	for _, tr := range trs {
		stayRollouts(t, tr, changes)
	}
	// Which instance restarted is said only in its log.
	restarts := len(restartLogs(a, "Deployment")) + len(restartLogs(b, "Deployment"))
	conflicts := len(a.logs.Lines("Write conflict")) + len(b.logs.Lines("Write conflict"))
	t.Logf("restarts by instance a: %d, by b: %d; write conflicts: %d", len(restartLogs(a, "Deployment")), len(restartLogs(b, "Deployment")), conflicts)
	NewWithT(t).Expect(restarts).To(Equal(workloads*changes), "restart log lines of both instances")
	NewWithT(t).Expect(conflicts).To(BeNumerically(">", 0), "the instances never raced: the test proves nothing")

	var events eventsv1.EventList
	NewWithT(t).Expect(k8s.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
	n := 0
	for _, e := range events.Items {
		if e.Reason == "Restarted" {
			n++
			NewWithT(t).Expect(e.Note).To(MatchRegexp(`^Restarted because ConfigMap cfg changed \(keys: a; [0-9a-f]{8}→[0-9a-f]{8}\)( by [^;]+)?$`))
		}
	}
	NewWithT(t).Expect(n).To(Equal(workloads*changes), "Restarted events")
}

// TestNewReferenceIsAdoptedNotRestarted: adding a reference to the pod spec
// rolls the workload by itself; watcher records it without a second rollout.
func TestNewReferenceIsAdoptedNotRestarted(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	create(t, configMap(ns, "cfg", map[string]string{"a": "1"}), secret(ns, "sec", map[string]string{"s": "1"}))
	dep := track(t, deployment(ns, "web", envFrom("cfg", "")))
	startWatcher(t, ns)
	waitAdopted(t, deployment(ns, "web", corev1.PodSpec{}))

	edit(t, deployment(ns, "web", corev1.PodSpec{}), func(d *appsv1.Deployment) {
		d.Spec.Template.Spec = envFrom("cfg", "sec")
	})
	NewWithT(t).Eventually(func() string {
		return fetch(t, deployment(ns, "web", corev1.PodSpec{})).Annotations[plan.RecordAnnotation]
	}, wait).Should(ContainSubstring("Secret/sec"))
	stayRollouts(t, dep, 1) // the user's own edit
	setSecret(t, secret(ns, "sec", nil), "s", "2")
	waitRollouts(t, dep, 2)
}

// TestMalformedAnnotationIsReported: a value that is not a boolean is
// reported with a Warning Event and does not stop restarts.
func TestMalformedAnnotationIsReported(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	d := deployment(ns, "web", envFrom("cfg", ""))
	d.Annotations = map[string]string{"require-restart": "nope"}
	dep := track(t, d)
	startWatcher(t, ns)
	waitAdopted(t, d)
	setConfigMap(t, cm, "a", "2")
	waitRollouts(t, dep, 1)
	NewWithT(t).Eventually(func() []string {
		var events eventsv1.EventList
		_ = k8s.List(ctx, &events, client.InNamespace(ns))
		var warnings []string
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == "InvalidAnnotation" && strings.Contains(e.Note, "require-restart") {
				warnings = append(warnings, e.Note)
			}
		}
		return warnings
	}, wait).ShouldNot(BeEmpty())
}

// TestNewHashKeyAdoptsAgain: a record made with another hash key (the key
// Secret was lost) cannot be compared; the workload is adopted again rather
// than restarted, and later changes restart it as usual.
func TestNewHashKeyAdoptsAgain(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	dep := track(t, deployment(ns, "web", envFrom("cfg", "")))
	startWatcher(t, ns)
	waitAdopted(t, deployment(ns, "web", corev1.PodSpec{}))
	keyID := fetch(t, deployment(ns, "web", corev1.PodSpec{})).Annotations[plan.HashKeyAnnotation]
	NewWithT(t).Expect(keyID).To(MatchRegexp(`^[0-9a-f]{16}$`))

	edit(t, deployment(ns, "web", corev1.PodSpec{}), func(d *appsv1.Deployment) {
		d.Annotations[plan.HashKeyAnnotation] = "0000000000000000"
	})
	NewWithT(t).Eventually(func() string {
		return fetch(t, deployment(ns, "web", corev1.PodSpec{})).Annotations[plan.HashKeyAnnotation]
	}, wait).Should(Equal(keyID))
	stayRollouts(t, dep, 0)
	setConfigMap(t, cm, "a", "2")
	waitRollouts(t, dep, 1)
}
