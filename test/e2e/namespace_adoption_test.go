package e2e

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/test/fixture"
)

// TestStandbyAdoptionByVersion: two replicas in the lease mode with
// --namespace-selector. The namespace comes to match while one of them is
// a standby: the leader adopts its Deployment, restarting nothing, and the
// standby, whose sources run, marks it for adoption too. The leader is
// killed, and the Deployment's ConfigMap changes before the standby leads:
// the new leader restarts the Deployment once for that change, made after
// the namespace came to match (its mark adopts only what was written
// before); the labelling itself restarted nothing.
func TestStandbyAdoptionByVersion(t *testing.T) {
	ns := namespace(t)
	cm := fixture.ConfigMap(ns, "cfg", map[string]string{"v": "0"})
	create(t, cm)
	dep := fixture.Deployment(ns, "web", fixture.EnvFrom(cm.Name, ""))
	tr := track(t, dep)
	const label = "watcher-e2e-adoption"
	args := []string{"--lock=lease", "--lease-duration=4s", "--lease-renew-deadline=3s", "--lease-retry-period=1s",
		"--namespace-selector=" + label + "=on"}
	replicas := []*proc{startWatcher(t, "watcher-0", ns, args...), startWatcher(t, "watcher-1", ns, args...)}
	for _, p := range replicas {
		p.WaitReady(t)
	}
	leader := waitLeader(t, replicas)
	standby := replicas[0]
	if standby == leader {
		standby = replicas[1]
	}
	stayRollouts(t, tr, 0, time.Second)

	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := &corev1.Namespace{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
			return err
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[label] = "on"
		return k8s.Update(ctx, n)
	})
	if err != nil {
		t.Fatalf("label namespace %s: %v", ns, err)
	}
	waitAdopted(t, dep)
	waitLog(t, standby, "Namespace selected")
	stayRollouts(t, tr, 0, 2*time.Second)

	leader.Kill()
	setData(t, cm, "v", "1")
	waitLeader(t, []*proc{standby})
	waitRollouts(t, tr, 1)
	stayRollouts(t, tr, 1, 3*time.Second)
	expectRestartsOnlyWhileLeading(t, standby)
}
