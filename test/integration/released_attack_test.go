package integration

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/util/retry"

	"github.com/watcher-dev/watcher/internal/controller"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/test/observe"
)

// watcherRollouts counts the rollouts of tr that watcher made (its
// template names what it restarted for).
func watcherRollouts(tr *observe.Tracker) int {
	n := 0
	for _, r := range tr.Rollouts() {
		if r.RestartedFor != "" {
			n++
		}
	}
	return n
}

// deploymentStatus writes the status of Deployment ns/name as its controller does
// once it observed its generation: replicas pods, updated of its template.
func deploymentStatus(t *testing.T, ns, name string, replicas, updated int32) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d := fetch(t, &appsv1.Deployment{ObjectMeta: meta(ns, name)})
		d.Status.ObservedGeneration, d.Status.Replicas, d.Status.UpdatedReplicas = d.Generation, replicas, updated
		return k8s.Status().Update(ctx, d)
	})
	if err != nil {
		t.Fatalf("status of %s/%s: %v", ns, name, err)
	}
}

// TestAttackReleasedThenUndo: a release without ids (the ConfigMap, then
// the Deployment's image, kubectl apply -f dir/ order) was recorded by rule
// Released at once, and no restart was made. The release is bad, and the operator
// runs kubectl rollout undo while its rollout is in progress: the template
// goes back to the one before the release, whose ReplicaSet still has the
// pods that were started before the ConfigMap changed. The deployment
// controller scales that ReplicaSet back up and keeps those pods: they run
// the old ConfigMap for ever, and watcher, which recorded the new content
// as applied, never restarts them. A missed change: watcher must restart
// the workload at some point after the ConfigMap changed (without the
// rule, its restart of the release's template would have been what the
// undo returned to).
func TestAttackReleasedThenUndo(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := configMap(ns, "app", map[string]string{"v": "1"})
	create(t, cm)
	dep := deployment(ns, "app", envFrom("app", ""))
	before := dep.Spec.Template.Spec.Containers[0].Image
	tr := track(t, dep)
	startWatcher(t, ns, func(o *options.Options) { o.Coalesce = time.Second })
	waitAdopted(t, deployment(ns, "app", envFrom("app", "")))
	// No deployment controller runs here: its status is written as it
	// would write it, one pod of the current template running.
	deploymentStatus(t, ns, "app", 1, 1)

	// The release: the configuration, then the workload.
	setConfigMap(t, cm, "v", "2")
	edit(t, &appsv1.Deployment{ObjectMeta: meta(ns, "app")}, func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Image = "registry.example/app:2"
	})
	waitRollouts(t, tr, 1)
	env.StayRollouts(t, tr, 1, 3*time.Second) // the release's own
	deploymentStatus(t, ns, "app", 2, 1)      // the new pod is not ready: the old one runs on

	// kubectl rollout undo, the release's rollout still in progress.
	edit(t, &appsv1.Deployment{ObjectMeta: meta(ns, "app")}, func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Image = before
	})
	deploymentStatus(t, ns, "app", 2, 1) // the old pod is of the current template again
	NewWithT(t).Eventually(func() int { return watcherRollouts(tr) }, 10*time.Second, 50*time.Millisecond).
		Should(BeNumerically(">=", 1), "the pods of the template the undo returned to predate ConfigMap v2: no restart ever brings it to them")
}

// TestReleasedOnceRolledOut: a release without ids whose rollout is done
// is recorded (Released), and watcher adds no rollout of its own.
func TestReleasedOnceRolledOut(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := configMap(ns, "app", map[string]string{"v": "1"})
	create(t, cm)
	tr := track(t, deployment(ns, "app", envFrom("app", "")))
	startWatcher(t, ns, func(o *options.Options) { o.Coalesce = time.Second })
	waitAdopted(t, deployment(ns, "app", envFrom("app", "")))
	deploymentStatus(t, ns, "app", 1, 1)

	setConfigMap(t, cm, "v", "2")
	edit(t, &appsv1.Deployment{ObjectMeta: meta(ns, "app")}, func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Image = "registry.example/app:2"
	})
	waitRollouts(t, tr, 1)
	env.StayRollouts(t, tr, 1, 2*time.Second)
	deploymentStatus(t, ns, "app", 2, 1)
	env.StayRollouts(t, tr, 1, 2*time.Second)
	deploymentStatus(t, ns, "app", 1, 1) // done
	waitEvent(t, ns, "app", controller.ReasonReleased, "the pod template was written after ConfigMap app")
	stayRollouts(t, tr, 1)
}
