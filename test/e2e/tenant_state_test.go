package e2e

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/cluster"
	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/test/fixture"
)

// TestCopiedRestartStateTakesNoSlot (issue 16, item 3): a tenant copies
// the restart state watcher signed on one of its workloads onto another
// whose new pods never become Ready. With one rollout slot, the copy makes
// that rollout no rollout of watcher's: the slot stays free, and another
// workload's change rolls at once, with no wave hold.
func TestCopiedRestartStateTakesNoSlot(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	a := fixture.ConfigMap(ns, "a", map[string]string{"k": "0"})
	b := fixture.ConfigMap(ns, "b", map[string]string{"k": "0"})
	create(t, a, b)
	source := fixture.Deployment(ns, "source", fixture.EnvFrom("a", ""))
	copier := fixture.Deployment(ns, "copier", fixture.EnvFrom("", ""))
	victim := fixture.Deployment(ns, "victim", fixture.EnvFrom("b", ""))
	create(t, source, copier, victim)
	startWatcher(t, "watcher", ns, "--max-concurrent-rollouts=1", "--rollout-timeout=10m")
	waitAdopted(t, source)
	waitAdopted(t, victim)
	waitRunning(t, source)

	// watcher restarts source and signs its state; the rollout finishes.
	setData(t, a, "k", "1")
	waitRestarted(t, ns, "source")
	waitRunning(t, source)
	state := get(t, source).Annotations[guard.StateAnnotation]
	g.Expect(state).NotTo(BeEmpty())

	// The tenant copies it onto copier and starts a rollout there that
	// never finishes.
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d := &appsv1.Deployment{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(copier), d); err != nil {
			return err
		}
		if d.Annotations == nil {
			d.Annotations = map[string]string{}
		}
		d.Annotations[guard.StateAnnotation] = state
		d.Spec.Template.Annotations = map[string]string{cluster.ReadyDelayAnnotation: time.Hour.String()}
		return k8s.Update(ctx, d)
	})).To(Succeed())
	g.Eventually(func() int { return replicaSets(t, copier) }, wait).Should(Equal(2), "copier rolls, and never finishes")

	// victim's change takes the one slot at once.
	before := replicaSets(t, victim)
	setData(t, b, "k", "1")
	g.Eventually(func() int { return replicaSets(t, victim) }, 10*time.Second, 100*time.Millisecond).Should(Equal(before+1),
		"the copied state took the slot: %s", eventNote(t, ns, "Deployment", "RestartHeld"))
	g.Expect(eventNote(t, ns, "Deployment", "RestartHeld")).NotTo(ContainSubstring("wave"))
}
