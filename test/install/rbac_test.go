package install

import (
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/test/fixture"
)

// TestRBAC installs the chart with helm into a namespace enforcing the
// restricted Pod Security Standard, in both RBAC scopes, and waits for its
// pod (on a kwok Node). Then the watcher binary runs with the environment of
// the release's Deployment and a token of its ServiceAccount (kubectl create
// token) and restarts a workload when its ConfigMap changes, never refused
// anything: the rights are enough. `kubectl auth can-i` shows they are no
// more than that.
func TestRBAC(t *testing.T) {
	for _, tc := range []struct {
		name, release string
		args          []string
		apps          string // the namespace of the user's workload
		// can and cannot are `kubectl auth can-i` arguments: verb,
		// resource, then -n namespace or other flags.
		can, cannot [][]string
	}{
		{
			name: "cluster", release: "rc", apps: "apps-x",
			args: []string{"--set", "discovery.ignoreWorkloadKinds={Job}"},
			can: [][]string{
				{"patch", "deployments", "-n", "apps-x"},
				{"list", "secrets", "--all-namespaces"},
				{"create", "events.events.k8s.io", "-n", "apps-x"},
				{"get", "secrets/rc-watcher-hash-key", "-n", "rbac-c"},
				{"update", "configmaps/rc-watcher-settings", "-n", "rbac-c"},                    // the settings it publishes
				{"watch", "customresourcedefinitions.apiextensions.k8s.io", "--all-namespaces"}, // to follow the optional APIs (cluster-scoped: no namespace)
			},
			cannot: [][]string{
				{"update", "secrets", "-n", "apps-x"},
				{"delete", "secrets", "-n", "apps-x"},
				{"patch", "secrets", "-n", "apps-x"},
				{"update", "configmaps", "-n", "apps-x"},
				{"update", "configmaps/other", "-n", "rbac-c"},
				{"delete", "configmaps", "-n", "rbac-c"}, // no Job re-creation records: Jobs ignored
				{"delete", "configmaps", "-n", "apps-x"},
				{"create", "pods", "-n", "apps-x"},
				{"create", "pods", "-n", "rbac-c"},
				{"delete", "deployments", "-n", "apps-x"},
				{"update", "deployments", "-n", "apps-x"},
				{"create", "jobs", "-n", "apps-x"}, // Jobs ignored, the CronJob trigger off
				{"list", "jobs", "--all-namespaces"},
				{"update", "secrets/rc-watcher-hash-key", "-n", "rbac-c"},
				{"delete", "secrets/rc-watcher-hash-key", "-n", "rbac-c"},
				{"create", "pods/exec", "-n", "apps-x"},
				{"patch", "nodes"},
				{"list", "namespaces", "--all-namespaces"}, // no discovery.namespaceSelector
				{"update", "customresourcedefinitions.apiextensions.k8s.io", "--all-namespaces"},
				{"delete", "customresourcedefinitions.apiextensions.k8s.io", "--all-namespaces"},
			},
		},
		{
			name: "namespaced", release: "rn", apps: "apps-a",
			args: []string{"--set", "rbac.scope=namespaced", "--set", "discovery.namespaces={apps-a,apps-b}", "--set", "restart.cronjobTrigger=true",
				"--set", "alerts.webhookURLSecret=alerts-n/hook:url",
				// A selector every namespace matches (the API server sets
				// the label): its informer runs with the chart's rights.
				"--set", "discovery.namespaceSelector=kubernetes.io/metadata.name"},
			can: [][]string{
				{"get", "secrets/hook", "-n", "alerts-n"}, // the alert URL, by name
				{"watch", "secrets/hook", "-n", "alerts-n"},
				{"patch", "deployments", "-n", "apps-a"},
				{"patch", "cronjobs", "-n", "apps-b"},
				{"create", "jobs", "-n", "apps-a"}, // the CronJob trigger, and Jobs re-created
				{"delete", "jobs", "-n", "apps-a"}, // concurrencyPolicy: Replace, and Jobs re-created
				{"watch", "jobs", "-n", "apps-b"},
				{"patch", "jobs", "-n", "apps-b"},                              // the record
				{"delete", "configmaps/watcher-recreate-0123", "-n", "rbac-n"}, // the records of Job re-creations
				{"list", "configmaps", "-n", "rbac-n"},
				{"list", "secrets", "-n", "apps-b"},
				{"get", "secrets/rn-watcher-hash-key", "-n", "rbac-n"},
				{"update", "leases/rn-watcher", "-n", "rbac-n"},
				{"list", "namespaces", "--all-namespaces"}, // discovery.namespaceSelector
				{"watch", "namespaces", "--all-namespaces"},
			},
			cannot: [][]string{
				{"patch", "deployments", "-n", "apps-c"},
				{"get", "secrets", "-n", "apps-c"},
				{"list", "configmaps", "-n", "apps-c"},
				{"list", "secrets", "--all-namespaces"},
				{"list", "deployments", "--all-namespaces"},
				{"create", "jobs", "-n", "apps-c"},
				{"get", "secrets/other", "-n", "rbac-n"},
				{"list", "secrets", "-n", "rbac-n"},
				{"update", "leases/other", "-n", "rbac-n"},
				{"update", "secrets", "-n", "apps-a"},
				{"delete", "configmaps", "-n", "apps-a"},
				{"create", "pods", "-n", "apps-a"},
				{"delete", "deployments", "-n", "apps-a"},
				{"get", "secrets/other", "-n", "alerts-n"},
				{"list", "secrets", "-n", "alerts-n"},
				{"update", "secrets/hook", "-n", "alerts-n"},
				{"get", "namespaces/apps-a", "--all-namespaces"},
				{"update", "namespaces/apps-a", "--all-namespaces"},
				// Nothing cluster-wide: the optional APIs are looked up in
				// discovery every minute instead.
				{"list", "customresourcedefinitions.apiextensions.k8s.io", "--all-namespaces"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := namespace(t, "rbac-"+tc.name[:1], restricted)
			namespace(t, tc.apps, nil)
			if tc.name == "namespaced" {
				namespace(t, "apps-b", nil)
				namespace(t, "apps-c", nil)
				namespace(t, "alerts-n", nil)
			}
			args := append([]string{"install", tc.release, chart, "-n", ns, "--wait", "--timeout=60s"}, tc.args...)
			notes := mustHelm(t, args...)
			t.Cleanup(func() { _, _ = helm(t, "uninstall", tc.release, "-n", ns, "--wait") })
			g.Expect(notes).To(And(ContainSubstring("is not published"), ContainSubstring("make image"), ContainSubstring("--set image.repository=")),
				"the notes say that the default image must be built and pushed")
			g.Expect(notes).NotTo(ContainSubstring("does not serve ValidatingAdmissionPolicy"))
			d := deployment(t, decode(t, []byte(mustHelm(t, "get", "manifest", tc.release, "-n", ns))))
			g.Expect(readyPods(t, ns)).To(Equal(1), "the release's pod runs (kwok) in a restricted namespace")

			for _, c := range tc.can {
				g.Expect(canI(t, ns, tc.release+"-watcher", c)).To(BeTrue(), "can %v", c)
			}
			for _, c := range tc.cannot {
				g.Expect(canI(t, ns, tc.release+"-watcher", c)).To(BeFalse(), "cannot %v", c)
			}
			// Any authenticated user reads the published settings (for
			// watcher explain), and nothing else of watcher's namespace.
			user := []string{"--as=alice", "--as-group=system:authenticated"}
			g.Expect(canUser(t, append([]string{"get", "configmaps/" + tc.release + "-watcher-settings", "-n", ns}, user...))).To(BeTrue())
			g.Expect(canUser(t, append([]string{"get", "configmaps/other", "-n", ns}, user...))).To(BeFalse())
			g.Expect(canUser(t, append([]string{"update", "configmaps/" + tc.release + "-watcher-settings", "-n", ns}, user...))).To(BeFalse())

			// What RBAC cannot narrow, the admission policy does: the
			// only Secret watcher may create is its hash key, the only
			// Jobs those shaped as the CronJob trigger's and as a Job
			// re-created. (Checked before watcher runs, so that the
			// trigger's Job below meets the policy.)
			g.Expect(find(decode(t, []byte(mustHelm(t, "get", "manifest", tc.release, "-n", ns))), "ValidatingAdmissionPolicy", tc.release+"-watcher-creates")).
				To(HaveLen(1), "the API server serves ValidatingAdmissionPolicy: helm installs the policy")
			refused(t, ns, tc.release+"-watcher", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"}},
				"watcher may create only its hash key Secret")
			// Under the hash key's name, a token Secret of another
			// ServiceAccount, which watcher could then read: refused too.
			tokenSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.release + "-watcher-hash-key",
				Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}}, Type: corev1.SecretTypeServiceAccountToken}
			refused(t, ns, tc.release+"-watcher", tokenSecret, "watcher may create only its hash key Secret")
			if triggered(tc.args) > 0 {
				job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: tc.apps, Name: "not-from-a-cronjob"},
					Spec: fixture.CronJob(tc.apps, "x", fixture.EnvFrom("cfg", "")).Spec.JobTemplate.Spec}
				refused(t, ns, tc.release+"-watcher", job, jobsRefused)
				jobShapes(t, ns, tc.release+"-watcher", tc.apps)
			}

			a := newApp(t, tc.apps)
			cj := fixture.CronJob(tc.apps, "nightly", fixture.EnvFrom("cfg", ""))
			g.Expect(k8s.Create(ctx, cj)).To(Succeed())
			var b *app // Jobs watched: an opted-in Job in apps-b is re-created
			var migrate *batchv1.Job
			if tc.name == "namespaced" {
				b = newApp(t, "apps-b")
				migrate = &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "apps-b", Name: "migrate",
					Annotations: map[string]string{"reloader.stakater.com/auto": "true"}},
					Spec: fixture.CronJob("apps-b", "x", fixture.EnvFrom("cfg", "")).Spec.JobTemplate.Spec}
				g.Expect(k8s.Create(ctx, migrate)).To(Succeed())
			}
			w := startWatcher(t, watcherBin, d, tokenKubeconfig(t, ns, tc.release+"-watcher"), nil)
			a.waitAdopted(t)
			a.change(t, "2")
			a.waitRollouts(t, 1)
			a.stayRollouts(t, 1, time.Second)
			if migrate != nil {
				uid := get(t, migrate).GetUID()
				g.Eventually(func() string { return get(t, migrate).GetAnnotations()[plan.RecordAnnotation] }, wait, 50*time.Millisecond).
					ShouldNot(BeEmpty(), "the opted-in Job is adopted")
				b.change(t, "2")
				g.Eventually(func() types.UID {
					cur := &batchv1.Job{}
					if err := k8s.Get(ctx, client.ObjectKeyFromObject(migrate), cur); err != nil {
						return ""
					}
					return cur.UID
				}, wait, 50*time.Millisecond).ShouldNot(Or(BeEmpty(), Equal(uid)), "the Job is re-created: deleted and created, as the rights and the admission policy allow")
			}
			// With the CronJob trigger, the restarted CronJob also runs now.
			g.Eventually(func() int { return len(jobs(t, tc.apps)) }, wait, 100*time.Millisecond).Should(Equal(triggered(tc.args)), "Jobs created by the CronJob trigger")
			noForbidden(t, w)
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: tc.release + "-watcher-hash-key"}, &corev1.Secret{})).To(Succeed())
			if tc.name == "namespaced" {
				// Out of scope: never seen, never recorded.
				out := newApp(t, "apps-c")
				time.Sleep(2 * time.Second)
				r, _ := out.record(t)
				g.Expect(r).To(BeEmpty(), "a workload outside the namespaces is left alone")
			}
		})
	}
}

// TestUserRoles: the chart's aggregated ClusterRoles are picked by the
// API server's own view, edit and admin roles (their aggregation rules'
// selectors match their labels): view reads ReloadPolicies, edit and admin
// also write them.
func TestUserRoles(t *testing.T) {
	g := NewWithT(t)
	objs := render(t, "ur", "ur")
	picks := func(role string, o *unstructured.Unstructured) bool {
		var r rbacv1.ClusterRole
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: role}, &r)).To(Succeed())
		g.Expect(r.AggregationRule).NotTo(BeNil(), "%s aggregates", role)
		for _, sel := range r.AggregationRule.ClusterRoleSelectors {
			s, err := metav1.LabelSelectorAsSelector(&sel)
			g.Expect(err).NotTo(HaveOccurred())
			if s.Matches(labels.Set(o.GetLabels())) {
				return true
			}
		}
		return false
	}
	view, edit := find(objs, "ClusterRole", "ur-watcher-reloadpolicies-view"), find(objs, "ClusterRole", "ur-watcher-reloadpolicies-edit")
	g.Expect(view).To(HaveLen(1))
	g.Expect(edit).To(HaveLen(1))
	for _, role := range []string{"view", "edit", "admin"} {
		g.Expect(picks(role, view[0])).To(BeTrue(), "%s reads ReloadPolicies", role)
		g.Expect(picks(role, edit[0])).To(Equal(role != "view"), "%s writes ReloadPolicies: %v", role, role != "view")
	}
}

// triggered is how many Jobs a restart of a CronJob creates with helm
// arguments args: one with the CronJob trigger.
func triggered(args []string) int {
	if slices.Contains(args, "restart.cronjobTrigger=true") {
		return 1
	}
	return 0
}

// jobs lists the Jobs of ns.
func jobs(t *testing.T, ns string) []batchv1.Job {
	t.Helper()
	var l batchv1.JobList
	if err := k8s.List(ctx, &l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// canI asks `kubectl auth can-i` whether the ServiceAccount ns/sa may do
// what args say.
func canI(t *testing.T, ns, sa string, args []string) bool {
	t.Helper()
	return canUser(t, append([]string{"--as=system:serviceaccount:" + ns + ":" + sa}, args...))
}

// canUser asks `kubectl auth can-i` with args, which say who asks
// (--as, --as-group).
func canUser(t *testing.T, args []string) bool {
	t.Helper()
	out, err := kubectl(append([]string{"auth", "can-i"}, args...)...)
	answer := strings.TrimSpace(out)
	switch {
	case err == nil && answer == "yes":
		return true
	case strings.HasSuffix(answer, "no"):
		return false
	}
	t.Fatalf("kubectl auth can-i %v: %v: %s", args, err, out)
	return false
}

// readyPods counts the Ready pods of ns.
func readyPods(t *testing.T, ns string) int {
	t.Helper()
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pods.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n
}
