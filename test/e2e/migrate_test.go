package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/cause"
	"github.com/watcher-dev/watcher/internal/migrate"
	"github.com/watcher-dev/watcher/test/fixture"
)

// reloaderDeployment is the Deployment Reloader's chart renders with
// enableHA and two replicas (test/fixture/reloader/ha.yaml), in ns.
func reloaderDeployment(t *testing.T, ns string) *appsv1.Deployment {
	t.Helper()
	r, err := fixture.ReloaderRender(fixture.ReloaderHA)
	if err != nil {
		t.Fatal(err)
	}
	d := r.Deployment
	d.Namespace, d.ResourceVersion = ns, ""
	return d
}

// migrateCLI runs watcher migrate with args against the cluster and
// returns its standard output; it must succeed.
func migrateCLI(t *testing.T, args ...string) string {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(c, watcherBin, append([]string{"migrate", "--kubeconfig", kube.Kubeconfig}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("watcher migrate %v: %v\n%s%s", args, err, out.String(), errOut.String())
	}
	return out.String()
}

// TestMigratePlan: watcher migrate reads a Reloader Deployment as Reloader's
// chart renders it (HA: two replicas, --enable-ha=true and the
// leader-election flags) and the cluster's
// workloads, and says what to apply (helm with Reloader's args and the
// replicas, dry-run first; the image swap with the RBAC in Reloader's
// namespace) and what differs: the workload that opts in is restarted
// under both installs, the one that does not only with watcher's own
// values, the CronJob is a difference of kind. The kubectl plugin prints
// the same plan as text, and -o rbac the RBAC of the image swap, which the
// API server accepts.
func TestMigratePlan(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	create(t, fixture.ConfigMap(ns, "cfg", map[string]string{"a": "1"}))
	web := fixture.Deployment(ns, "web", fixture.EnvFrom("cfg", ""))
	web.Annotations = map[string]string{"reloader.stakater.com/auto": "true"}
	plain := fixture.Deployment(ns, "plain", fixture.EnvFrom("cfg", ""))
	nightly := fixture.CronJob(ns, "nightly", fixture.EnvFrom("cfg", ""))
	nightly.Annotations = map[string]string{"configmap.reloader.stakater.com/reload": "cfg"}
	create(t, reloaderDeployment(t, ns), web, plain, nightly)

	var plans []migrate.Plan
	out := migrateCLI(t, "-n", ns, "-o", "json", "--image", "registry.example/watcher:1")
	g.Expect(json.Unmarshal([]byte(out), &plans)).To(Succeed(), out)
	g.Expect(plans).To(HaveLen(1))
	p := plans[0]
	g.Expect(p.Reloader.Name).To(Equal("reloader-reloader"))
	g.Expect(p.Reloader.Replicas).To(Equal(int32(2)))
	g.Expect(p.Helm.ExtraArgs).To(Equal(reloaderDeployment(t, ns).Spec.Template.Spec.Containers[0].Args))
	g.Expect(p.Helm.Values).To(ContainElements(
		And(HaveField("Path", "replicas"), HaveField("JSON", "2")),
		And(HaveField("Path", "discovery.mode"), HaveField("JSON", `"annotated"`))))
	g.Expect(p.Helm.Install).To(ContainSubstring(`--set-json 'extraArgs=["--log-level=info","--enable-ha=true",`))
	g.Expect(p.Helm.Values).To(ContainElement(And(HaveField("Path", "lock.leaseDuration"), HaveField("JSON", `"20s"`))))
	g.Expect(p.Helm.Install).To(ContainSubstring("--set restart.dryRun=true"))
	g.Expect(p.ImageSwap.Commands).To(ContainElement(fmt.Sprintf("kubectl -n %s set image deployment/reloader-reloader reloader-reloader=registry.example/watcher:1", ns)))
	g.Expect(p.Notes).To(ContainElement(ContainSubstring("Reloader's --enable-ha accepted")))
	// Reloader's namespace holds the users' ConfigMap: the image swap
	// would put watcher's rights beside it.
	g.Expect(p.ImageSwap.Warning).To(ContainElements(
		"WARNING: Reloader's namespace "+ns+" is shared: it holds 1 other ConfigMap besides Reloader's:", "  ConfigMaps: cfg"))

	mine := map[string]migrate.Workload{}
	for _, w := range p.Workloads {
		if w.Namespace == ns {
			mine[w.Kind+"/"+w.Name] = w
		}
	}
	t.Logf("workloads of %s: %+v", ns, mine)
	g.Expect(mine).To(HaveKeyWithValue("Deployment/web", And(HaveField("OptsIn", true), HaveField("WithReloaderArgs", true), HaveField("WithOwnValues", true))))
	g.Expect(mine).To(HaveKeyWithValue("Deployment/plain", And(HaveField("OptsIn", false), HaveField("WithReloaderArgs", false), HaveField("WithOwnValues", true))))
	g.Expect(mine).To(HaveKeyWithValue("CronJob/nightly", And(HaveField("OptsIn", true), HaveField("WithReloaderArgs", true))))
	g.Expect(mine).NotTo(HaveKey("Deployment/reloader-reloader"), "Reloader itself uses nothing")
	g.Expect(p.Counts.OptIn).To(BeNumerically(">=", 2))
	g.Expect(p.Differences).To(ContainElement(And(HaveField("Topic", migrate.TopicKinds), HaveField("Restarts", true),
		HaveField("Workloads", ContainElement("CronJob "+ns+"/nightly")))))
	g.Expect(p.Differences).To(ContainElement(And(HaveField("Topic", migrate.TopicOwnValues),
		HaveField("Text", ContainSubstring("not opting in would restart too")))))
	g.Expect(p.Differences).To(ContainElement(HaveField("Topic", migrate.TopicStrategy)))

	plugins := t.TempDir()
	if err := os.Symlink(watcherBin, filepath.Join(plugins, "kubectl-watcher")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(kube.BinDir, "kubectl"), "watcher", "migrate", "--kubeconfig", kube.Kubeconfig, "-n", ns, "--deployment", "reloader-reloader")
	cmd.Env = []string{"PATH=" + plugins + ":" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	text, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", text)
	t.Logf("kubectl watcher migrate:\n%s", text)
	g.Expect(string(text)).To(ContainSubstring("Reloader " + ns + "/reloader-reloader (container reloader-reloader"))
	g.Expect(string(text)).To(ContainSubstring("helm install watcher deploy/helm/watcher -n watcher --create-namespace"))
	g.Expect(string(text)).To(ContainSubstring("! [kinds] CronJobs: Reloader creates a Job"))
	g.Expect(string(text)).To(ContainSubstring("kubectl watcher migrate -n " + ns + " --deployment reloader-reloader -o rbac | kubectl apply -f -"))
	g.Expect(string(text)).To(ContainSubstring("   WARNING: Reloader's namespace " + ns + " is shared"))

	rbac := migrateCLI(t, "-n", ns, "--deployment", "reloader-reloader", "-o", "rbac")
	g.Expect(rbac).To(ContainSubstring("namespace: " + ns + "\n"))
	g.Expect(rbac).NotTo(MatchRegexp(`namespace: reloader\n`))
	// The admission policy, which the API server compiles on the dry run.
	g.Expect(rbac).To(ContainSubstring("kind: ValidatingAdmissionPolicy\n"))
	g.Expect(rbac).To(ContainSubstring("request.userInfo.username == 'system:serviceaccount:" + ns + ":reloader-reloader'"))
	apply := exec.CommandContext(ctx, filepath.Join(kube.BinDir, "kubectl"), "--kubeconfig", kube.Kubeconfig, "apply", "--dry-run=server", "-f", "-")
	apply.Stdin = bytes.NewReader([]byte(rbac))
	applied, err := apply.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", applied)
	g.Expect(string(applied)).To(ContainSubstring("created (server dry run)"))
}

// TestMigrateCompare: watcher runs in --dry-run beside a "Reloader" (the
// test writes what Reloader writes): a change of a ConfigMap makes watcher
// emit WouldRestart on its two users; Reloader reloads one of them (its
// last-reloaded-from annotation, as its annotations strategy writes it)
// and another workload by its env-vars strategy (a STAKATER_ variable,
// written by its field manager) and a third by an Event only. watcher
// migrate --compare says agree, only watcher and only Reloader for each.
func TestMigrateCompare(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	cm := fixture.ConfigMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	both := fixture.Deployment(ns, "both", fixture.EnvFrom("cfg", ""))
	watcherOnly := fixture.Deployment(ns, "watcher-only", fixture.EnvFrom("cfg", ""))
	envMarked := fixture.Deployment(ns, "env-marked", fixture.PodSpec(corev1.Container{}))
	evented := fixture.Deployment(ns, "evented", fixture.PodSpec(corev1.Container{}))
	create(t, both, watcherOnly, envMarked, evented)

	w := startWatcherEnv(t, "dry", ns, []string{"DRY_RUN=true"})
	w.WaitReady(t)
	waitLog(t, w, "Dry run: would write the record, restarting nothing", "Deployment "+ns+"/both")
	waitLog(t, w, "Dry run: would write the record, restarting nothing", "Deployment "+ns+"/watcher-only")
	setData(t, cm, "a", "2")
	waitEvent(t, ns, "both", cause.ReasonWouldRestart, "ConfigMap cfg changed (keys: a;")
	waitEvent(t, ns, "watcher-only", cause.ReasonWouldRestart, "ConfigMap cfg changed (keys: a;")

	// What Reloader writes: its annotation on both, by its annotations strategy...
	mark := fmt.Sprintf(`{"type":"CONFIGMAP","name":"cfg","namespace":%q,"hash":"0a1b","containerRefs":["app"],"observedAt":%d}`, ns, time.Now().Unix())
	patch := client.RawPatch("application/strategic-merge-patch+json",
		fmt.Appendf(nil, `{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, migrate.LastReloadedFrom, mark))
	g.Expect(k8s.Patch(ctx, both, patch, client.FieldOwner("Reloader"))).To(Succeed())
	// ...its variable on env-marked, by env-vars...
	patch = client.RawPatch("application/strategic-merge-patch+json",
		[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"app","env":[{"name":"STAKATER_CFG_CONFIGMAP","value":"0a1b"}]}]}}}}`))
	g.Expect(k8s.Patch(ctx, envMarked, patch, client.FieldOwner("Reloader"))).To(Succeed())
	// ...and the Event its recorder sends (core API), here alone.
	now := metav1.Now()
	create(t, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: ns, Name: "evented.reloaded"},
		InvolvedObject: corev1.ObjectReference{Kind: "Deployment", APIVersion: "apps/v1", Namespace: ns, Name: "evented"},
		Reason:         migrate.ReasonReloaded, Type: corev1.EventTypeNormal,
		Message: fmt.Sprintf("Changes detected in 'cfg' of type 'CONFIGMAP' in namespace '%s', Updated 'evented' of type 'Deployment' in namespace '%s'", ns, ns),
		Source:  corev1.EventSource{Component: "reloader-configmaps"}, FirstTimestamp: now, LastTimestamp: now, Count: 1,
	})

	var c migrate.Comparison
	out := migrateCLI(t, "--compare", "-n", ns, "--since", "10m", "-o", "json")
	g.Expect(json.Unmarshal([]byte(out), &c)).To(Succeed(), out)
	got := map[string]string{}
	for _, o := range c.Outcomes {
		got[o.Name] = o.Result
	}
	g.Expect(got).To(Equal(map[string]string{"both": migrate.Agree, "watcher-only": migrate.OnlyWatcher,
		"env-marked": migrate.OnlyReloader, "evented": migrate.OnlyReloader}), out)
	text := migrateCLI(t, "--compare", "-n", ns)
	t.Logf("watcher migrate --compare:\n%s", text)
	g.Expect(text).To(ContainSubstring("1 agree, 1 only watcher, 2 only Reloader"))
	g.Expect(text).To(MatchRegexp(`  Reloader: \S+ env STAKATER_CFG_CONFIGMAP ConfigMap\n`))
	g.Expect(text).To(ContainSubstring("Event Reloaded: Changes detected in 'cfg'"))
}
