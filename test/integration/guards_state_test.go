package integration

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/hold"
	"github.com/watcher-dev/watcher/internal/options"
)

// TestBudgetSurvivesRestart: the restart budget counts the restarts written
// before watcher restarted (a new process, or a new leader), read back from
// the restart state watcher signs on the workload; a copy of that state on
// another workload counts for nothing.
func TestBudgetSurvivesRestart(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	budget := func(o *options.Options) { o.RestartBudget = options.Rate{Count: 1, Per: time.Hour} }
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	dep := deployment(ns, "web", envFrom("cfg", ""))
	tr := track(t, dep)
	w := startWatcher(t, ns, budget)
	waitAdopted(t, dep)
	setConfigMap(t, cm, "a", "2")
	waitRollouts(t, tr, 1)
	state := fetch(t, dep).GetAnnotations()[guard.StateAnnotation]
	NewWithT(t).Expect(state).NotTo(BeEmpty(), "no restart state written with the restart")
	w.Stop()

	// A tenant copies the state onto a Deployment of its own.
	other := deployment(ns, "copy", envFrom("cfg", ""))
	other.Annotations = map[string]string{guard.StateAnnotation: state}
	trOther := track(t, other)

	startWatcher(t, ns, budget)
	waitAdopted(t, other)
	setConfigMap(t, cm, "a", "3")
	// The copy is a workload never restarted: its budget is whole.
	waitRollouts(t, trOther, 1)
	// web was restarted once within the hour, by the old process.
	stayRollouts(t, tr, 1)
	NewWithT(t).Eventually(func() []string { return events(t, ns, "web", hold.ReasonRestartHeld) }, wait, 20*time.Millisecond).
		Should(ContainElement(ContainSubstring("Restart held (budget)")))
}

// TestBurstIsOneChange: eight edits of a ConfigMap in 3.2 s (a script
// setting keys one by one), with the default debounce and flap threshold,
// are one change: one rollout soon after the burst, no Flapping Event, no
// hold. And a ConfigMap nobody uses, edited as often, never flaps.
func TestBurstIsOneChange(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	defaults := func(o *options.Options) {
		d := options.Defaults()
		o.Coalesce, o.CoalesceMax, o.FlapThreshold, o.FlapQuiet = d.Coalesce, d.CoalesceMax, d.FlapThreshold, d.FlapQuiet
	}
	cm := configMap(ns, "cfg", map[string]string{"k0": "0"})
	unused := configMap(ns, "unused", map[string]string{"k0": "0"})
	create(t, cm, unused)
	dep := deployment(ns, "web", envFrom("cfg", ""))
	tr := track(t, dep)
	startWatcher(t, ns, defaults)
	waitAdopted(t, dep)
	start := time.Now()
	for i := 1; i <= 8; i++ {
		setConfigMap(t, cm, "k0", fmt.Sprint(i))
		setConfigMap(t, unused, "k0", fmt.Sprint(i))
		time.Sleep(400 * time.Millisecond)
	}
	waitRollouts(t, tr, 1)
	t.Logf("rolled %s after the burst began", time.Since(start).Round(time.Millisecond))
	stayRollouts(t, tr, 1)
	g := NewWithT(t)
	g.Expect(events(t, ns, "cfg", hold.ReasonFlapping)).To(BeEmpty())
	g.Expect(events(t, ns, "unused", hold.ReasonFlapping)).To(BeEmpty())
	g.Expect(events(t, ns, "web", hold.ReasonRestartHeld)).To(BeEmpty())
}
