package integration

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/test/fixture"
)

// TestIgnoredWorkloadKinds: with --ignore-workload-kinds CronJob (what
// Reloader's --ignored-workload-types cronjobs maps to), a CronJob using a
// changed ConfigMap is neither adopted nor restarted; a Deployment using
// it is.
func TestIgnoredWorkloadKinds(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	cj := fixture.CronJob(ns, "nightly", envFrom("cfg", ""))
	create(t, cj)
	dep := track(t, deployment(ns, "web", envFrom("cfg", "")))
	startWatcher(t, ns, func(o *options.Options) { o.IgnoreWorkloadKinds = []string{"CronJob"} })
	waitAdopted(t, deployment(ns, "web", corev1.PodSpec{}))

	setConfigMap(t, cm, "a", "2")
	waitRollouts(t, dep, 1)
	g.Consistently(func() map[string]string { return fetch(t, cj).Annotations }, 2*time.Second).
		ShouldNot(HaveKey(plan.RecordAnnotation), "the CronJob is not watched")
	g.Expect(fetch(t, cj).Spec.JobTemplate.Spec.Template.Annotations).To(BeEmpty(), "nor restarted")
}
