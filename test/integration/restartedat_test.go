package integration

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/watcher-dev/watcher/api/v1alpha1"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/restart"
)

// restartedAtStrategy runs a watcher with the restarted-at strategy.
func restartedAtStrategy(o *options.Options) { o.RestartStrategy = "restarted-at" }

// restartedAt returns the time kubectl's annotation holds on d's pod
// template, after checking that it is the only mark of a restart there.
func restartedAt(g Gomega, d *appsv1.Deployment) time.Time {
	a := d.Spec.Template.Annotations
	g.Expect(a).To(HaveKey(restart.RestartedAtAnnotation), "%s restarted by restarted-at", d.Name)
	g.Expect(a).NotTo(HaveKey(plan.RestartAnnotation), "%s also restarted by annotation", d.Name)
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			g.Expect(e.Name).NotTo(Equal(restart.EnvName), "%s container %s", d.Name, c.Name)
		}
	}
	at, err := time.Parse(time.RFC3339, a[restart.RestartedAtAnnotation])
	g.Expect(err).NotTo(HaveOccurred(), "an RFC 3339 time")
	return at
}

// TestStrategyRestartedAt: with --restart-strategy restarted-at, a change
// rolls the workload once and sets kubectl's restartedAt annotation to the
// time of the restart (and nothing else on the template); a second change
// rolls it again with another value, even within the same second; the
// same data written again, and a restart of watcher, roll nothing and
// leave the time as it was: the hashes, not the time, decide.
func TestStrategyRestartedAt(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	d := deployment(ns, "web", envFrom("cfg", ""))
	tr := track(t, d)
	w := startWatcher(t, ns, restartedAtStrategy)
	waitAdopted(t, d)
	stayRollouts(t, tr, 0)
	g.Expect(fetch(t, d).Spec.Template.Annotations).NotTo(HaveKey(restart.RestartedAtAnnotation), "adoption restarts nothing")

	before := time.Now().Truncate(time.Second)
	setConfigMap(t, cm, "a", "2")
	waitRollouts(t, tr, 1)
	stayRollouts(t, tr, 1)
	first := restartedAt(g, fetch(t, d))
	g.Expect(first).To(BeTemporally(">=", before))
	g.Expect(first).To(BeTemporally("<=", time.Now()))

	// Again at once, most likely within the same second: another value.
	setConfigMap(t, cm, "a", "3")
	waitRollouts(t, tr, 2)
	stayRollouts(t, tr, 2)
	second := restartedAt(g, fetch(t, d))
	g.Expect(second).NotTo(Equal(first))
	g.Expect(second).To(BeTemporally(">=", first.Truncate(time.Second)))

	edit(t, cm, func(cm *corev1.ConfigMap) {
		cm.Labels = map[string]string{"written": "again"}
		cm.Data = map[string]string{"a": "3"}
	})
	stayRollouts(t, tr, 2)
	w.Stop()
	startWatcher(t, ns, restartedAtStrategy)
	stayRollouts(t, tr, 2)
	g.Expect(restartedAt(g, fetch(t, d))).To(Equal(second))
}

// TestStrategyRestartedAtChosen: restarted-at is chosen for one workload by
// its watcher.dev/restart-strategy annotation and by a ReloadPolicy's
// strategy, beside a workload of the default strategy (annotation).
func TestStrategyRestartedAtChosen(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	c := policies(t)
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	plain := deployment(ns, "plain", envFrom("cfg", ""))
	byAnnotation := deployment(ns, "by-annotation", envFrom("cfg", ""))
	byAnnotation.Annotations = map[string]string{restart.StrategyAnnotation: "restarted-at"}
	byPolicy := deployment(ns, "by-policy", envFrom("cfg", ""))
	trPlain, trAnnotation, trPolicy := track(t, plain), track(t, byAnnotation), track(t, byPolicy)
	startWatcher(t, ns) // the default: annotation
	p := reloadPolicy(ns, "p", []v1alpha1.Source{{Kind: v1alpha1.SourceConfigMap, Name: "cfg"}},
		v1alpha1.Target{Kind: v1alpha1.TargetDeployment, Name: "by-policy"})
	p.Spec.Strategy = v1alpha1.StrategyRestartedAt
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	for _, d := range []*appsv1.Deployment{plain, byAnnotation, byPolicy} {
		waitAdopted(t, d)
	}
	waitRecords(t, ns, "by-policy", "ConfigMap/cfg")

	setConfigMap(t, cm, "a", "2")
	waitRollouts(t, trPlain, 1)
	waitRollouts(t, trAnnotation, 1)
	waitRollouts(t, trPolicy, 1)
	stayRollouts(t, trPolicy, 1)
	restartedAt(g, fetch(t, byAnnotation))
	restartedAt(g, fetch(t, byPolicy))
	got := fetch(t, plain).Spec.Template.Annotations
	g.Expect(got).To(HaveKey(plan.RestartAnnotation), "the default strategy")
	g.Expect(got).NotTo(HaveKey(restart.RestartedAtAnnotation))
}
