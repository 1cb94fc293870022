package integration

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/api/v1alpha1"
	"github.com/watcher-dev/watcher/internal/cause"
	"github.com/watcher-dev/watcher/internal/cli"
	"github.com/watcher-dev/watcher/internal/explain"
	"github.com/watcher-dev/watcher/internal/hold"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/policy"
	"github.com/watcher-dev/watcher/internal/restart"
)

// reloadPolicy returns a policy of ns restarting targets for sources.
func reloadPolicy(ns, name string, sources []v1alpha1.Source, targets ...v1alpha1.Target) *v1alpha1.ReloadPolicy {
	return &v1alpha1.ReloadPolicy{ObjectMeta: meta(ns, name), Spec: v1alpha1.ReloadPolicySpec{Sources: sources, Targets: targets}}
}

// ready returns the Ready condition of the policy, nil if it has none
// for its current generation.
func ready(t *testing.T, c client.Client, p *v1alpha1.ReloadPolicy) *metav1.Condition {
	t.Helper()
	got := &v1alpha1.ReloadPolicy{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.ObservedGeneration != got.Generation {
		return nil
	}
	return apimeta.FindStatusCondition(got.Status.Conditions, policy.ConditionReady)
}

// waitReady waits until the policy's Ready condition has status and
// reason.
func waitReady(t *testing.T, c client.Client, p *v1alpha1.ReloadPolicy, status metav1.ConditionStatus, reason string) *metav1.Condition {
	t.Helper()
	var got *metav1.Condition
	NewWithT(t).Eventually(func() string {
		got = ready(t, c, p)
		if got == nil {
			return "no Ready condition"
		}
		return string(got.Status) + " " + got.Reason
	}, wait, 20*time.Millisecond).Should(Equal(string(status) + " " + reason))
	return got
}

// editPolicy reads p, applies change and writes it back, retrying
// conflicts.
func editPolicy(t *testing.T, c client.Client, p *v1alpha1.ReloadPolicy, change func(*v1alpha1.ReloadPolicy)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		change(p)
		return c.Update(ctx, p)
	})
	if err != nil {
		t.Fatalf("update %s: %v", p.Name, err)
	}
}

// waitRecords waits until watcher recorded the object id ("Kind/name") on
// the Deployment name.
func waitRecords(t *testing.T, ns, name, id string) {
	t.Helper()
	NewWithT(t).Eventually(func() string {
		return fetch(t, deployment(ns, name, corev1.PodSpec{})).Annotations[plan.RecordAnnotation]
	}, wait, 10*time.Millisecond).Should(ContainSubstring(`"`+id+`"`), "%s records %s", name, id)
}

// TestPolicyRestartsTarget: a policy restarts its target, whose pod spec
// does not use the source, for changes of the keys it lists only; a
// workload it does not target is left alone; the restart is in the
// policy's status.
func TestPolicyRestartsTarget(t *testing.T) {
	t.Parallel()
	c := policies(t)
	ns := namespace(t)
	cm := configMap(ns, "shared", map[string]string{"LOG_LEVEL": "info", "OTHER": "1"})
	create(t, cm)
	api := track(t, deployment(ns, "api", podSpec(corev1.Container{})))
	worker := track(t, deployment(ns, "worker", podSpec(corev1.Container{})))
	w := startWatcher(t, ns)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(w.logs)
		}
	})
	p := reloadPolicy(ns, "api-settings",
		[]v1alpha1.Source{{Kind: v1alpha1.SourceConfigMap, Name: "shared", Keys: []string{"LOG_LEVEL"}}},
		v1alpha1.Target{Kind: v1alpha1.TargetDeployment, Name: "api"})
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitRecords(t, ns, "api", "ConfigMap/shared")
	waitReady(t, c, p, metav1.ConditionTrue, policy.ReasonValid)
	graphSeesPolicy(t, ns)

	setConfigMap(t, cm, "OTHER", "2") // not a key of the policy
	stayRollouts(t, api, 0)
	setConfigMap(t, cm, "LOG_LEVEL", "debug")
	waitRollouts(t, api, 1)
	stayRollouts(t, worker, 0)
	NewWithT(t).Eventually(func() []v1alpha1.Restart {
		got := &v1alpha1.ReloadPolicy{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
			t.Fatal(err)
		}
		return got.Status.LastRestarts
	}, wait).Should(ConsistOf(And(
		HaveField("Kind", v1alpha1.TargetDeployment), HaveField("Name", "api"),
		HaveField("Sources", []string{"ConfigMap/shared"}))))
}

// TestPolicySelectorSource: a source by selector restarts the target for
// changes of each Secret whose labels match, one created later included,
// and not for a Secret whose labels do not.
func TestPolicySelectorSource(t *testing.T) {
	t.Parallel()
	c := policies(t)
	ns := namespace(t)
	a := secret(ns, "a", map[string]string{"k": "1"})
	a.Labels = map[string]string{"tier": "api"}
	other := secret(ns, "other", map[string]string{"k": "1"})
	create(t, a, other)
	api := track(t, deployment(ns, "api", podSpec(corev1.Container{})))
	startWatcher(t, ns)
	p := reloadPolicy(ns, "tier",
		[]v1alpha1.Source{{Kind: v1alpha1.SourceSecret, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "api"}}}},
		v1alpha1.Target{Kind: v1alpha1.TargetDeployment, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}})
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	// The target selector selects nothing yet: the Deployment has no label.
	waitReady(t, c, p, metav1.ConditionTrue, policy.ReasonTargetsNotFound)
	edit(t, deployment(ns, "api", corev1.PodSpec{}), func(d *appsv1.Deployment) { d.Labels = map[string]string{"app": "api"} })
	waitRecords(t, ns, "api", "Secret/a")
	waitReady(t, c, p, metav1.ConditionTrue, policy.ReasonValid)

	setSecret(t, other, "k", "2")
	stayRollouts(t, api, 0)
	setSecret(t, a, "k", "2")
	waitRollouts(t, api, 1)

	b := secret(ns, "b", map[string]string{"k": "1"})
	b.Labels = map[string]string{"tier": "api"}
	create(t, b)
	waitRecords(t, ns, "api", "Secret/b")
	setSecret(t, b, "k", "2")
	waitRollouts(t, api, 2)
}

// TestPolicyNotFoundYet: a policy whose source and target do not exist is
// Ready with reasons saying which, then works once they appear; an
// invalid schedule or time zone makes it not Ready, with the reason.
func TestPolicyNotFoundYet(t *testing.T) {
	t.Parallel()
	c := policies(t)
	ns := namespace(t)
	startWatcher(t, ns)
	p := reloadPolicy(ns, "early",
		[]v1alpha1.Source{{Kind: v1alpha1.SourceConfigMap, Name: "later"}},
		v1alpha1.Target{Kind: v1alpha1.TargetDeployment, Name: "api"})
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	cond := waitReady(t, c, p, metav1.ConditionTrue, policy.ReasonSourcesNotFound)
	NewWithT(t).Expect(cond.Message).To(And(ContainSubstring("ConfigMap later does not exist"), ContainSubstring("Deployment api does not exist")))

	cm := configMap(ns, "later", map[string]string{"k": "1"})
	create(t, cm)
	cond = waitReady(t, c, p, metav1.ConditionTrue, policy.ReasonTargetsNotFound)
	NewWithT(t).Expect(cond.Message).To(ContainSubstring("Deployment api does not exist"))
	api := track(t, deployment(ns, "api", podSpec(corev1.Container{})))
	waitReady(t, c, p, metav1.ConditionTrue, policy.ReasonValid)
	waitRecords(t, ns, "api", "ConfigMap/later")
	setConfigMap(t, cm, "k", "2")
	waitRollouts(t, api, 1)

	for _, tc := range []struct {
		window v1alpha1.MaintenanceWindow
		reason string
	}{
		{v1alpha1.MaintenanceWindow{Schedule: "0 2 * * *", Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "Mars/Olympus_Mons"}, policy.ReasonInvalidTimeZone},
		{v1alpha1.MaintenanceWindow{Schedule: "99 2 * * *", Duration: metav1.Duration{Duration: time.Hour}}, policy.ReasonInvalidSchedule},
	} {
		editPolicy(t, c, p, func(p *v1alpha1.ReloadPolicy) { p.Spec.MaintenanceWindows = []v1alpha1.MaintenanceWindow{tc.window} })
		waitReady(t, c, p, metav1.ConditionFalse, tc.reason)
	}
}

// TestPolicyDeletionReleases: once its policy is deleted, a target that
// does not use the source is restarted by it no more, and its record
// forgets it; a workload that uses the source itself still restarts.
func TestPolicyDeletionReleases(t *testing.T) {
	t.Parallel()
	c := policies(t)
	ns := namespace(t)
	cm := configMap(ns, "shared", map[string]string{"k": "1"})
	create(t, cm)
	api := track(t, deployment(ns, "api", podSpec(corev1.Container{})))
	user := track(t, deployment(ns, "user", envFrom("shared", "")))
	startWatcher(t, ns)
	p := reloadPolicy(ns, "p", []v1alpha1.Source{{Kind: v1alpha1.SourceConfigMap, Name: "shared"}},
		v1alpha1.Target{Kind: v1alpha1.TargetDeployment, Name: "api"})
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitRecords(t, ns, "api", "ConfigMap/shared")
	setConfigMap(t, cm, "k", "2")
	waitRollouts(t, api, 1)
	waitRollouts(t, user, 1)

	if err := c.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	// No reference left: the record is removed.
	NewWithT(t).Eventually(func() bool { return recorded(t, ns, "api") }, wait).Should(BeFalse())
	setConfigMap(t, cm, "k", "3")
	waitRollouts(t, user, 2)
	stayRollouts(t, api, 1)
}

// TestPolicyAnnotatedDiscovery: in the annotated mode, being a policy's
// target opts in, for the policy's sources only; a consumer of the source
// that no policy targets and that does not opt in is never written.
func TestPolicyAnnotatedDiscovery(t *testing.T) {
	t.Parallel()
	c := policies(t)
	ns := namespace(t)
	cm := configMap(ns, "shared", map[string]string{"k": "1"})
	own := configMap(ns, "own", map[string]string{"k": "1"})
	create(t, cm, own)
	spec := envFrom("shared", "")
	spec.Containers[0].EnvFrom = append(spec.Containers[0].EnvFrom, envFrom("own", "").Containers[0].EnvFrom...)
	api := track(t, deployment(ns, "api", spec))
	plain := track(t, deployment(ns, "plain", envFrom("shared", "")))
	startWatcher(t, ns, discoverAnnotated)
	p := reloadPolicy(ns, "p", []v1alpha1.Source{{Kind: v1alpha1.SourceConfigMap, Name: "shared"}},
		v1alpha1.Target{Kind: v1alpha1.TargetDeployment, Name: "api"})
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitRecords(t, ns, "api", "ConfigMap/shared")
	setConfigMap(t, own, "k", "2") // used, but not named by the policy
	stayRollouts(t, api, 0)
	setConfigMap(t, cm, "k", "2")
	waitRollouts(t, api, 1)
	stayRollouts(t, plain, 0)
	NewWithT(t).Expect(recorded(t, ns, "plain")).To(BeFalse())
}

// TestPolicyConsumers: a policy without targets applies to the workloads
// whose pod spec uses a source: its keys filter and its strategy apply to
// them; a workload that does not use it is not touched.
func TestPolicyConsumers(t *testing.T) {
	t.Parallel()
	c := policies(t)
	ns := namespace(t)
	cm := configMap(ns, "shared", map[string]string{"LOG_LEVEL": "info", "OTHER": "1"})
	create(t, cm)
	user := track(t, deployment(ns, "user", envFrom("shared", "")))
	startWatcher(t, ns)
	waitAdopted(t, deployment(ns, "user", corev1.PodSpec{}))
	p := reloadPolicy(ns, "p", []v1alpha1.Source{{Kind: v1alpha1.SourceConfigMap, Name: "shared", Keys: []string{"LOG_LEVEL"}}})
	p.Spec.Strategy = v1alpha1.StrategyEnv
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	// The record narrows to the policy's key.
	NewWithT(t).Eventually(func() string {
		return fetch(t, deployment(ns, "user", corev1.PodSpec{})).Annotations[plan.RecordAnnotation]
	}, wait).ShouldNot(ContainSubstring("OTHER"))
	setConfigMap(t, cm, "OTHER", "2")
	stayRollouts(t, user, 0)
	setConfigMap(t, cm, "LOG_LEVEL", "debug")
	waitRollouts(t, user, 1)
	got := fetch(t, deployment(ns, "user", corev1.PodSpec{}))
	NewWithT(t).Expect(got.Spec.Template.Spec.Containers[0].Env).To(ContainElement(HaveField("Name", restart.EnvName)), "the policy's env strategy")
}

// TestPolicyDryRun: a dry-run policy writes nothing on its target (no
// rollout, no record) and says, once per change, what it would do (an
// Event WouldRestart, watcher_would_restart_total); turning dryRun off
// makes the next change restart it.
func TestPolicyDryRun(t *testing.T) {
	t.Parallel()
	c := policies(t)
	ns := namespace(t)
	cm := configMap(ns, "shared", map[string]string{"k": "1"})
	create(t, cm)
	api := track(t, deployment(ns, "api", podSpec(corev1.Container{})))
	w := startWatcher(t, ns)
	p := reloadPolicy(ns, "p", []v1alpha1.Source{{Kind: v1alpha1.SourceConfigMap, Name: "shared"}},
		v1alpha1.Target{Kind: v1alpha1.TargetDeployment, Name: "api"})
	p.Spec.DryRun = true
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitReady(t, c, p, metav1.ConditionTrue, policy.ReasonValid)
	waitLog(t, w, "Dry run: would write the record", "Deployment "+ns+"/api")
	before := testutil.ToFloat64(metrics.WouldRestart.WithLabelValues("Deployment"))
	setConfigMap(t, cm, "k", "2")
	NewWithT(t).Eventually(func() []string { return events(t, ns, "api", cause.ReasonWouldRestart) }, wait).
		Should(ConsistOf(ContainSubstring("ConfigMap shared changed")))
	stayRollouts(t, api, 0)
	NewWithT(t).Expect(recorded(t, ns, "api")).To(BeFalse(), "nothing written")
	NewWithT(t).Expect(testutil.ToFloat64(metrics.WouldRestart.WithLabelValues("Deployment")) - before).To(BeNumerically(">=", 1))
	NewWithT(t).Expect(events(t, ns, "api", cause.ReasonWouldRestart)).To(HaveLen(1), "said once")

	editPolicy(t, c, p, func(p *v1alpha1.ReloadPolicy) { p.Spec.DryRun = false })
	waitRecords(t, ns, "api", "ConfigMap/shared")
	stayRollouts(t, api, 0)
	setConfigMap(t, cm, "k", "3")
	waitRollouts(t, api, 1)
}

// TestPolicyMaintenanceWindow: outside its policy's window, a target's
// restart is held (no rollout; pending in the policy's status, with since
// and reason MaintenanceWindow; one Event RestartHeld); once a window is
// open (here: the policy edited to one that is always open) exactly one
// restart is written, the pending entry goes and lastRestarts has it.
func TestPolicyMaintenanceWindow(t *testing.T) {
	t.Parallel()
	c := policies(t)
	ns := namespace(t)
	cm := configMap(ns, "shared", map[string]string{"k": "1"})
	create(t, cm)
	api := track(t, deployment(ns, "api", envFrom("shared", "")))
	startWatcher(t, ns)
	waitAdopted(t, deployment(ns, "api", corev1.PodSpec{}))
	p := reloadPolicy(ns, "p", []v1alpha1.Source{{Kind: v1alpha1.SourceConfigMap, Name: "shared"}},
		v1alpha1.Target{Kind: v1alpha1.TargetDeployment, Name: "api"})
	// Open one minute a year, 1 January at 00:00.
	p.Spec.MaintenanceWindows = []v1alpha1.MaintenanceWindow{{Schedule: "0 0 1 1 *", Duration: metav1.Duration{Duration: time.Minute}, TimeZone: "Europe/Berlin"}}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitReady(t, c, p, metav1.ConditionTrue, policy.ReasonValid)

	setConfigMap(t, cm, "k", "2")
	status := func() v1alpha1.ReloadPolicyStatus {
		got := &v1alpha1.ReloadPolicy{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
			t.Fatal(err)
		}
		return got.Status
	}
	NewWithT(t).Eventually(func() []v1alpha1.PendingRestart { return status().Pending }, wait).Should(ConsistOf(And(
		HaveField("Kind", v1alpha1.TargetDeployment), HaveField("Name", "api"), HaveField("Reason", policy.ReasonMaintenanceWindow),
		HaveField("Since.Time", BeTemporally("~", time.Now(), wait)))))
	stayRollouts(t, api, 0)
	NewWithT(t).Expect(events(t, ns, "api", hold.ReasonRestartHeld)).To(ConsistOf(ContainSubstring("outside the maintenance windows of ReloadPolicy p")))

	editPolicy(t, c, p, func(p *v1alpha1.ReloadPolicy) {
		p.Spec.MaintenanceWindows = []v1alpha1.MaintenanceWindow{{Schedule: "* * * * *", Duration: metav1.Duration{Duration: time.Hour}}}
	})
	waitRollouts(t, api, 1)
	stayRollouts(t, api, 1)
	NewWithT(t).Eventually(func() []v1alpha1.PendingRestart { return status().Pending }, wait).Should(BeEmpty())
	NewWithT(t).Expect(status().LastRestarts).To(ConsistOf(HaveField("Name", "api")))
}

// graphSeesPolicy: `watcher graph` shows what the policy of
// TestPolicyRestartsTarget adds, as the controller's resolver does: api
// uses ConfigMap shared, key LOG_LEVEL, found by the policy; worker uses
// nothing.
func graphSeesPolicy(t *testing.T, ns string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Main(ctx, []string{"watcher", "graph", "-n", ns, "-o", "json", "--kubeconfig", writeKubeconfig(t), "--watcher-namespace", ns}, &out, &errOut)
	g := NewWithT(t)
	g.Expect(code).To(Equal(0), errOut.String())
	var graph explain.Graph
	g.Expect(json.Unmarshal(out.Bytes(), &graph)).To(Succeed())
	uses := map[string][]explain.Use{}
	for _, w := range graph.Workloads {
		uses[w.Name] = w.Uses
	}
	g.Expect(uses["api"]).To(ConsistOf(And(HaveField("Kind", "ConfigMap"), HaveField("Name", "shared"),
		HaveField("Keys", []string{"LOG_LEVEL"}), HaveField("Sources", ContainElement("reload policies")))))
	g.Expect(uses["worker"]).To(BeEmpty())
}
