package integration

import (
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

	w = startWatcher(t, ns, budget)
	waitAdopted(t, other)
	setConfigMap(t, cm, "a", "3")
	// The copy is a workload never restarted: its budget is whole.
	waitRollouts(t, trOther, 1)
	// web was restarted once within the hour, by the old process.
	stayRollouts(t, tr, 1)
	NewWithT(t).Eventually(func() []string { return events(t, ns, "web", hold.ReasonRestartHeld) }, wait, 20*time.Millisecond).
		Should(ContainElement(ContainSubstring("Restart held (budget)")))
}
