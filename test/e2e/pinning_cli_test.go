package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/cli"
	"github.com/watcher-dev/watcher/internal/controller"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/test/fixture"
)

// TestPinnedCLI (issue 31): the commands of pinned revisions, run as a
// user runs them (the built binary). After two config changes of the
// pinned scene, watcher history lists three revisions, newest first, with
// each pinned source's snapshot, the keys changed and who changed them
// (the test's field manager, e2e.test), and never the Secret's value;
// after an image change, watcher rollback --to-revision 2 brings back
// revision 2's config and keeps the new image (a config-only rollback:
// the pods read revision 2's snapshots); watcher stale then lists the
// Deployment rolled back, and one whose restart a ReloadPolicy's
// maintenance window holds, and not one that is up to date.
func TestPinnedCLI(t *testing.T) {
	installPolicyCRD(t)
	s := newPinnedScene(t)
	g := NewWithT(t)
	const secret = "s3cr3t-value-2"

	setData(t, s.cm, "mode", "v2")
	g.Eventually(func() int { return s.revision(t) }, wait).Should(Equal(2))
	waitRunning(t, s.dep)
	second := s.template(t)
	setData(t, s.sec, "password", secret)
	g.Eventually(func() int { return s.revision(t) }, wait).Should(Equal(3))
	waitRunning(t, s.dep)
	third := s.template(t)
	g.Expect(third[dbSource]).NotTo(Equal(second[dbSource]))

	// history: three revisions, newest first.
	var h cli.History
	text := runCLI(t, &h, "history", "deployment/web", "-n", s.ns)
	t.Logf("watcher history:\n%s", runCLI(t, nil, "history", "deployment/web", "-n", s.ns))
	for _, out := range []string{text, runCLI(t, nil, "history", "deployment/web", "-n", s.ns)} {
		g.Expect(out).NotTo(ContainSubstring(secret), "no Secret value")
		g.Expect(out).NotTo(ContainSubstring(base64.StdEncoding.EncodeToString([]byte(secret))), "no Secret value")
	}
	g.Expect(h.Revisions).To(HaveLen(3))
	rev3, rev2, rev1 := h.Revisions[0], h.Revisions[1], h.Revisions[2]
	g.Expect([]int64{rev3.Revision, rev2.Revision, rev1.Revision}).To(Equal([]int64{3, 2, 1}))
	g.Expect(rev3.Current && !rev2.Current).To(BeTrue())
	g.Expect(rev1.Pinned).To(BeFalse(), "made before any restart: unpinned")
	byName := func(r cli.RevisionHistory) map[string]cli.PinnedSource {
		out := map[string]cli.PinnedSource{}
		for _, p := range r.Sources {
			out[p.Source] = p
		}
		return out
	}
	r3, r2 := byName(rev3), byName(rev2)
	g.Expect(r3).To(HaveLen(3))
	g.Expect(r3["secret/db"].Snapshot).To(Equal(third[dbSource]))
	g.Expect(r3["secret/db"].Digest).To(HaveLen(pin.SumLen))
	g.Expect(r3["secret/db"].Status).To(Equal("changed"))
	g.Expect(r3["secret/db"].Keys).To(Equal([]string{"password"}))
	g.Expect(r3["secret/db"].ChangedBy).To(Equal([]string{"e2e.test"}))
	g.Expect(r3["secret/db"].Since).NotTo(BeNil())
	g.Expect(r3["configmap/app"].Status).To(Equal("same"))
	g.Expect(r3["configmap/app"].Snapshot).To(Equal(second[appSource]))
	g.Expect(r2["configmap/app"].Status).To(Equal("first"), "revision 1 pins nothing to compare with")
	g.Expect(r2["configmap/app"].ChangedBy).To(Equal([]string{"e2e.test"}))
	g.Expect(r2["secret/db"].Snapshot).To(Equal(second[dbSource]))

	g.Expect(runCLI(t, nil, "rollback", "deployment/web", "--to-revision", "1", "-n", s.ns)).
		To(ContainSubstring("revision 1 pins nothing"))

	// An image change, then a config-only rollback to revision 2.
	image := "registry.example/app:2"
	setImage(t, s.dep, image)
	g.Eventually(func() int { return s.revision(t) }, wait).Should(Equal(4))
	waitRunning(t, s.dep)
	g.Expect(s.template(t)).To(Equal(third), "an image change keeps the pins")
	out := runCLI(t, nil, "rollback", "deployment/web", "--to-revision", "2", "-n", s.ns)
	t.Logf("watcher rollback:\n%s", out)
	g.Expect(out).To(ContainSubstring("the config of revision 2, keeping its image (" + image + ")"))
	g.Eventually(func() int { return s.revision(t) }, wait).Should(Equal(5))
	g.Expect(s.template(t)).To(Equal(second))
	dep := get(t, &appsv1.Deployment{ObjectMeta: s.dep.ObjectMeta})
	g.Expect(dep.Spec.Template.Spec.Containers[0].Image).To(Equal(image), "config-only rollback keeping the image")
	waitRunning(t, s.dep)
	g.Eventually(func() []string { return s.podsRead(t) }, wait).Should(HaveEach(second[appSource] + "," + second[dbSource]))
	g.Eventually(func() string { return eventNote(t, s.ns, "Deployment", controller.ReasonRolledBack) }, wait).
		Should(ContainSubstring("secret db back to " + second[dbSource] + " from " + third[dbSource]))
	g.Consistently(func() int { return s.revision(t) }, 3*time.Second, 200*time.Millisecond).Should(Equal(5), "no roll forward")
	// Revision 2 is gone (revisionHistoryLimit 2); the snapshot only it
	// pinned stays, with the workload's new revision.
	g.Expect(get(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: second[dbSource]}})).NotTo(BeNil())
	g.Expect(runCLI(t, nil, "rollback", "deployment/web", "--to-revision", "1", "-n", s.ns)).
		To(ContainSubstring("no revision 1: the revisions kept are 5, 4, 3"), "revisionHistoryLimit 2")

	// stale: a Deployment held by a closed maintenance window is listed,
	// one up to date is not.
	other := fixture.ConfigMap(s.ns, "other", map[string]string{"k": "1"})
	create(t, other)
	held, fresh := fixture.Deployment(s.ns, "held", fixture.EnvFrom("other", "")), fixture.Deployment(s.ns, "fresh", fixture.EnvFrom("other", ""))
	create(t, held, fresh)
	create(t, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "watcher.dev/v1alpha1", "kind": "ReloadPolicy",
		"metadata": map[string]any{"namespace": s.ns, "name": "held-window"},
		"spec": map[string]any{
			"sources":            []any{map[string]any{"kind": "ConfigMap", "name": "other"}},
			"targets":            []any{map[string]any{"kind": "Deployment", "name": "held"}},
			"maintenanceWindows": []any{map[string]any{"schedule": "0 0 1 1 *", "duration": "1m", "timeZone": "UTC"}},
		},
	}})
	waitAdopted(t, held)
	waitAdopted(t, fresh)
	g.Eventually(func() []any { // the policy seen before the change
		p := &unstructured.Unstructured{}
		p.SetGroupVersionKind(schema.GroupVersionKind{Group: "watcher.dev", Version: "v1alpha1", Kind: "ReloadPolicy"})
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: "held-window"}, p)).To(Succeed())
		conds, _, _ := unstructured.NestedSlice(p.Object, "status", "conditions")
		return conds
	}, wait).Should(ContainElement(And(HaveKeyWithValue("type", "Ready"), HaveKeyWithValue("status", "True"))))
	setData(t, other, "k", "2")
	waitRestarted(t, s.ns, "fresh")
	waitLog(t, s.w, "Restart held", `"reason": "window"`)
	whys := func() map[string]cli.Stale {
		var rep cli.StaleReport
		runCLI(t, &rep, "stale", "-n", s.ns, "--watcher-namespace", s.ns)
		out := map[string]cli.Stale{}
		for _, w := range rep.Workloads {
			out[w.Name] = w
		}
		return out
	}
	g.Eventually(func() string { return whys()["held"].Detail }, wait).Should(Equal("ReloadPolicy held-window: MaintenanceWindow"))
	stale := whys()
	g.Expect(stale).NotTo(HaveKey("fresh"), "up to date")
	g.Expect(stale["held"].Why).To(Equal("held"))
	g.Expect(stale["held"].Since).NotTo(BeNil())
	g.Expect(stale["held"].Sources).To(Equal([]cli.StaleSource{{Kind: "ConfigMap", Name: "other", Keys: []string{"k"}}}))
	g.Expect(stale["web"].Why).To(Equal("rolled back"))
	g.Expect(stale["web"].Sources).To(ContainElement(cli.StaleSource{Kind: "Secret", Name: "db", Keys: []string{"password"}, Snapshot: second[dbSource]}))
	text = runCLI(t, nil, "stale", "-n", s.ns, "--watcher-namespace", s.ns)
	t.Logf("watcher stale:\n%s", text)
	g.Expect(text).NotTo(ContainSubstring(secret))
	var all cli.StaleReport
	runCLI(t, &all, "stale", "-A", "--watcher-namespace", s.ns)
	g.Expect(all.Workloads).To(ContainElement(HaveField("Name", "held")), "-A: every namespace")

	// The same binary named kubectl-watcher is a kubectl plugin.
	plugins := t.TempDir()
	if err := os.Symlink(watcherBin, filepath.Join(plugins, "kubectl-watcher")); err != nil {
		t.Fatal(err)
	}
	kubectl := exec.CommandContext(ctx, filepath.Join(kube.BinDir, "kubectl"), "watcher", "history", "deploy/web", "-n", s.ns, "--kubeconfig", kube.Kubeconfig)
	kubectl.Env = []string{"PATH=" + plugins + ":" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	plugged, err := kubectl.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "kubectl watcher history: %s", plugged)
	g.Expect(string(plugged)).To(HavePrefix("Deployment " + s.ns + "/web\n\nREVISION 5 (current)"))
}

// runCLI runs the built binary with args and returns its output, its
// stdout decoded into into (with -o json) when into is not nil; a command
// that fails (exit code 1: refused) returns its stderr.
func runCLI(t *testing.T, into any, args ...string) string {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if into != nil {
		args = append(args, "-o", "json")
	}
	cmd := exec.CommandContext(c, watcherBin, args...)
	cmd.Env = []string{"KUBECONFIG=" + kube.Kubeconfig, "PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if cmd.ProcessState != nil && cmd.ProcessState.ExitCode() == 1 {
		return stderr.String()
	}
	if err != nil {
		t.Fatalf("watcher %v: %v: %s%s", args, err, stdout.String(), stderr.String())
	}
	if into != nil {
		if err := json.Unmarshal(stdout.Bytes(), into); err != nil {
			t.Fatalf("watcher %v: %v: %s", args, err, stdout.String())
		}
	}
	return stdout.String() + stderr.String()
}

// setImage sets the image of dep's first container.
func setImage(t *testing.T, dep *appsv1.Deployment, image string) {
	t.Helper()
	patch, _ := json.Marshal([]map[string]string{{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": image}})
	if err := k8s.Patch(ctx, &appsv1.Deployment{ObjectMeta: dep.ObjectMeta}, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		t.Fatal(err)
	}
}
