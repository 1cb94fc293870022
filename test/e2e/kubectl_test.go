package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/test/fixture"
)

// TestKubectlWatcherExplain: the binary named kubectl-watcher on the PATH
// is a kubectl plugin: the control plane's own kubectl runs
// `kubectl watcher explain` and `kubectl watcher graph`, which read the
// cluster with kubectl's flags and report a restart watcher made, from its
// Event, and a change made since, pending.
func TestKubectlWatcherExplain(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	cm := fixture.ConfigMap(ns, "cfg", map[string]string{"a": "1", "b": "1"})
	create(t, cm)
	dep := fixture.Deployment(ns, "web", fixture.EnvFrom("cfg", ""))
	tr := track(t, dep)
	w := startWatcher(t, "watcher", ns)
	w.WaitReady(t)
	waitAdopted(t, dep)
	setData(t, cm, "a", "2")
	waitRollouts(t, tr, 1)
	waitRestarted(t, ns, "web")
	// Events are sent in the background: the one explain reports must be
	// there before watcher stops.
	g.Eventually(func() int {
		var list eventsv1.EventList
		g.Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		n := 0
		for _, e := range list.Items {
			if e.Regarding.Name == "web" && e.Reason == "Restarted" {
				n++
			}
		}
		return n
	}, wait).Should(Equal(1))
	w.Stop()
	setData(t, cm, "b", "2")

	plugins := t.TempDir()
	if err := os.Symlink(watcherBin, filepath.Join(plugins, "kubectl-watcher")); err != nil {
		t.Fatal(err)
	}
	kubectl := func(args ...string) string {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(c, filepath.Join(kube.BinDir, "kubectl"), args...)
		cmd.Env = []string{"PATH=" + plugins + ":" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
		out, err := cmd.CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "kubectl %v: %s", args, out)
		return string(out)
	}
	out := kubectl("watcher", "explain", "deployment/web", "--kubeconfig", kube.Kubeconfig, "-n", ns, "--watcher-namespace", ns)
	t.Logf("kubectl watcher explain:\n%s", out)
	g.Expect(out).To(ContainSubstring("Deployment " + ns + "/web\n"))
	g.Expect(out).To(ContainSubstring("Status:   restart pending because ConfigMap cfg changed (keys: b)"))
	g.Expect(out).To(MatchRegexp(`\n    a\s+([0-9a-f]{8})\s+([0-9a-f]{8})\s+same\n`))
	g.Expect(out).To(MatchRegexp(`\n    b\s+[0-9a-f]{8}\s+[0-9a-f]{8}\s+changed\n`))
	g.Expect(out).To(MatchRegexp(`Last restarts:\n  \S+  Restarted  Restarted because ConfigMap cfg changed \(keys: a;`))

	out = kubectl("watcher", "graph", "--kubeconfig", kube.Kubeconfig, "-n", ns, "--watcher-namespace", ns)
	t.Logf("kubectl watcher graph:\n%s", out)
	g.Expect(out).To(Equal("Deployment " + ns + "/web\n  ConfigMap cfg  every key  envFrom containers[app].envFrom[0]\n"))
}
