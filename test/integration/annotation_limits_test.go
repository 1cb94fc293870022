package integration

import (
	"strings"
	"testing"
	"unicode/utf8"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/optin"
)

// maxEventNote is the longest note the API server accepts on an
// events.k8s.io/v1 Event.
const maxEventNote = 1024

// TestOverLimitReloadList: a reload list over the limits (12,000 entries
// a{1000}, 96 KB: under the API server's 256 KiB, and hundreds of MiB if
// compiled) is refused whole: a Warning InvalidAnnotation on that workload
// and the error metric; its pod spec's references still count, and the
// other workloads still restart.
func TestOverLimitReloadList(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	huge := strings.TrimSuffix(strings.Repeat("a{1000},", 12000), ",")
	before := testutil.ToFloat64(metrics.Errors.WithLabelValues("annotation"))
	bad := track(t, annotated(ns, "bad", envFrom("cfg", ""), map[string]string{optin.ConfigMapReload: huge}))
	good := track(t, deployment(ns, "good", envFrom("cfg", "")))
	startWatcher(t, ns)
	waitAdopted(t, deployment(ns, "good", corev1.PodSpec{}))
	waitAdopted(t, deployment(ns, "bad", corev1.PodSpec{}))

	g := NewWithT(t)
	g.Eventually(func() []string { return events(t, ns, "bad", "InvalidAnnotation") }, wait).Should(
		ContainElement(And(ContainSubstring(optin.ConfigMapReload), ContainSubstring("ignoring the whole list"))))
	for _, note := range events(t, ns, "bad", "InvalidAnnotation") {
		g.Expect(len(note)).To(BeNumerically("<", 512), "the note does not echo the list")
	}
	g.Expect(testutil.ToFloat64(metrics.Errors.WithLabelValues("annotation"))).To(BeNumerically(">", before))
	g.Expect(events(t, ns, "good", "InvalidAnnotation")).To(BeEmpty())

	setConfigMap(t, cm, "a", "2")
	waitRollouts(t, good, 1)
	waitRollouts(t, bad, 1) // the pod spec's reference: nothing else changes
}

// TestInvalidAnnotationNoteFits: the InvalidAnnotation note of a workload
// with many malformed annotations is cut to the API's 1,024 bytes, on a
// rune boundary, marked with an ellipsis (a longer note is refused by the
// API server: no Event at all).
func TestInvalidAnnotationNoteFits(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	create(t, configMap(ns, "cfg", map[string]string{"a": "1"}))
	tooMany := strings.TrimSuffix(strings.Repeat("x,", optin.MaxListEntries+1), ",")
	ann := map[string]string{
		optin.Auto: "yes", optin.ReloaderAuto: "oui", optin.ConfigMapAuto: "ja", optin.SecretAuto: "sí",
		optin.Search: "True", optin.PausePeriod: "soon",
		optin.ConfigMapReload:  "(é1,(é2,(é3,(é4,(é5",
		optin.SecretReload:     "[é1,[é2,[é3,[é4",
		optin.ConfigMapExclude: tooMany, optin.SecretExclude: tooMany,
	}
	if n := len(optin.Check(ann).Error()); n <= maxEventNote {
		t.Fatalf("the annotations make a message of %d bytes; the test needs more than %d", n, maxEventNote)
	}
	track(t, annotated(ns, "bad", envFrom("cfg", ""), ann))
	startWatcher(t, ns)
	waitAdopted(t, deployment(ns, "bad", corev1.PodSpec{}))

	g := NewWithT(t)
	g.Eventually(func() []string { return events(t, ns, "bad", "InvalidAnnotation") }, wait).ShouldNot(BeEmpty())
	for _, note := range events(t, ns, "bad", "InvalidAnnotation") {
		g.Expect(len(note)).To(BeNumerically("<=", maxEventNote))
		g.Expect(utf8.ValidString(note)).To(BeTrue(), "cut on a rune boundary")
		g.Expect(note).To(HaveSuffix("…"))
		g.Expect(note).To(ContainSubstring(optin.Auto))
	}
}

// TestReloaderTemplateFallbackPerKind: as in Reloader, the pod template's
// annotations count per kind: a Deployment naming a Secret on its metadata
// still reads its template's ConfigMap reload list (through watcher's
// store, which keeps it); the template's Secret list does not count, the
// workload's own does.
func TestReloaderTemplateFallbackPerKind(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	db, other := secret(ns, "db", map[string]string{"s": "1"}), secret(ns, "other", map[string]string{"s": "1"})
	create(t, cm, db, other)
	d := annotated(ns, "web", podSpec(corev1.Container{}), map[string]string{optin.SecretReload: "db"})
	d.Spec.Template.Annotations = map[string]string{optin.ConfigMapReload: "cfg", optin.SecretReload: "other"}
	dep := track(t, d)
	startWatcher(t, ns, discoverAnnotated)
	waitAdopted(t, deployment(ns, "web", corev1.PodSpec{}))

	setConfigMap(t, cm, "a", "2")
	waitRollouts(t, dep, 1)
	setSecret(t, db, "s", "2")
	waitRollouts(t, dep, 2)
	setSecret(t, other, "s", "2")
	stayRollouts(t, dep, 2)
}
