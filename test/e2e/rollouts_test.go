package e2e

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/test/fixture"
	"github.com/watcher-dev/watcher/test/observe"
)

// TestEveryKindRollsOncePerChange: a Deployment, a StatefulSet and a
// DaemonSet each roll out exactly once per real change, to Pods running the
// new template.
func TestEveryKindRollsOncePerChange(t *testing.T) {
	ns := namespace(t)
	cm := fixture.ConfigMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	objs := []client.Object{
		fixture.Deployment(ns, "dep", fixture.EnvFrom("cfg", "")),
		fixture.StatefulSet(ns, "sts", fixture.EnvFrom("cfg", "")),
		fixture.DaemonSet(ns, "ds", fixture.EnvFrom("cfg", "")),
	}
	var trs []*observe.Tracker
	for _, o := range objs {
		trs = append(trs, track(t, o))
	}
	startWatcher(t, "watcher", ns)
	for _, o := range objs {
		waitAdopted(t, o)
		waitRunning(t, o)
	}
	for change := 1; change <= 2; change++ {
		setData(t, cm, "a", fmt.Sprint(change+1))
		for i, o := range objs {
			waitRollouts(t, trs[i], change)
			waitRunning(t, o)
		}
	}
	for i, tr := range trs {
		stayRollouts(t, tr, 2, time.Second)
		waitRestarted(t, ns, objs[i].GetName(), "ConfigMap cfg changed (keys: a;")
	}
}

// TestBurstRollsOnce: five edits within the coalescing delay roll the
// workload once, to the last content.
func TestBurstRollsOnce(t *testing.T) {
	ns := namespace(t)
	sec := fixture.Secret(ns, "sec", map[string]string{"token": "0"})
	create(t, sec)
	dep := fixture.Deployment(ns, "web", fixture.EnvFrom("", "sec"))
	tr := track(t, dep)
	w := startWatcher(t, "watcher", ns, "--coalesce=5s")
	waitAdopted(t, dep)
	start := time.Now()
	for i := 1; i <= 5; i++ {
		setData(t, sec, "token", fmt.Sprint(i))
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("the burst took %s, longer than the coalescing delay allows for this test", d)
	}
	waitRollouts(t, tr, 1)
	stayRollouts(t, tr, 1, 6*time.Second)
	waitRunning(t, dep)
	// The rollout was for the last content: a fresh watcher finds nothing
	// to do.
	w.Stop()
	w = startWatcher(t, "watcher-2", ns)
	w.WaitReady(t)
	stayRollouts(t, tr, 1, 2*time.Second)
	NewWithT(t).Expect(restartLines(w, "")).To(BeEmpty())
}

// TestProjectedSecretVolume: a Secret mounted through a projected volume.
func TestProjectedSecretVolume(t *testing.T) {
	ns := namespace(t)
	sec := fixture.Secret(ns, "creds", map[string]string{"password": "a"})
	create(t, sec)
	dep := fixture.Deployment(ns, "web", fixture.ProjectedSecret("creds"))
	tr := track(t, dep)
	startWatcher(t, "watcher", ns)
	waitAdopted(t, dep)
	setData(t, sec, "password", "b")
	waitRollouts(t, tr, 1)
	waitRunning(t, dep)
	waitRestarted(t, ns, "web", "Secret creds changed (keys: password;")
}

// TestKilledMidBurst: watcher is killed with SIGKILL in the middle of a burst
// of changes and started again. Every workload ends rolled for the latest
// configuration, and no workload is rolled twice for the same configuration.
func TestKilledMidBurst(t *testing.T) {
	ns := namespace(t)
	const configs, perConfig, changes = 5, 4, 30
	var cms []*corev1.ConfigMap
	var trs []*observe.Tracker
	for c := range configs {
		cm := fixture.ConfigMap(ns, name("cfg", c), map[string]string{"v": "0"})
		create(t, cm)
		cms = append(cms, cm)
		for i := range perConfig {
			trs = append(trs, track(t, fixture.Deployment(ns, name(cm.Name+"-user", i), fixture.EnvFrom(cm.Name, ""))))
		}
	}
	w := startWatcher(t, "watcher", ns, "--lock=none")
	w.WaitReady(t)
	for _, cm := range cms {
		for i := range perConfig {
			waitAdopted(t, fixture.Deployment(ns, name(cm.Name+"-user", i), corev1.PodSpec{}))
		}
	}

	lastChange := make([]time.Time, configs)
	for i := range changes {
		c := i % configs
		setData(t, cms[c], "v", fmt.Sprint(i+1))
		lastChange[c] = time.Now()
		if i == changes/2 {
			w.Kill()
		}
		time.Sleep(30 * time.Millisecond)
	}
	w = startWatcher(t, "watcher-restarted", ns, "--lock=none")
	w.WaitReady(t)

	for i, tr := range trs {
		c := i / perConfig
		NewWithT(t).Eventually(func() bool {
			r := tr.Rollouts()
			return len(r) > 0 && r[len(r)-1].At.After(lastChange[c])
		}, wait, 50*time.Millisecond).Should(BeTrue(), "%s rolled after the last change of its ConfigMap", tr.Name)
	}
	time.Sleep(2 * time.Second)
	for _, tr := range trs {
		var seen []string
		for _, r := range tr.Rollouts() {
			NewWithT(t).Expect(seen).NotTo(ContainElement(r.RestartedFor), "%s rolled twice for the same configuration", tr.Name)
			seen = append(seen, r.RestartedFor)
		}
		t.Logf("%s: %d rollouts", tr.Name, len(seen))
	}
	// Level-triggered check: a third watcher finds every workload up to date.
	w.Stop()
	third := startWatcher(t, "watcher-third", ns, "--lock=none")
	third.WaitReady(t)
	time.Sleep(2 * time.Second)
	NewWithT(t).Expect(restartLines(third, "")).To(BeEmpty())
}

// TestAPIServerRestart: kube-apiserver restarts under a running watcher;
// changes made after it is back are handled.
func TestAPIServerRestart(t *testing.T) {
	ns := namespace(t)
	cm := fixture.ConfigMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	dep := fixture.Deployment(ns, "web", fixture.EnvFrom("cfg", ""))
	tr := track(t, dep)
	w := startWatcher(t, "watcher", ns)
	waitAdopted(t, dep)

	if err := kube.RestartAPIServer(ctx); err != nil {
		t.Fatalf("restart kube-apiserver: %v", err)
	}
	setData(t, cm, "a", "2")
	waitRollouts(t, tr, 1)
	waitRunning(t, dep)
	waitRestarted(t, ns, "web")
	select {
	case <-w.Done():
		t.Fatalf("watcher exited:\n%s", w.Logs)
	default:
	}
}
