package integration

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/api/v1alpha1"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/policy"
)

// closedWindow is open one minute a year, 1 January at 00:00.
var closedWindow = []v1alpha1.MaintenanceWindow{{Schedule: "0 0 1 1 *", Duration: metav1.Duration{Duration: time.Minute}, TimeZone: "Europe/Berlin"}}

// pendingOf returns the names of the workloads the status of p lists as
// pending.
func pendingOf(t *testing.T, c client.Client, p *v1alpha1.ReloadPolicy) func() []string {
	return func() []string {
		got := &v1alpha1.ReloadPolicy{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range got.Status.Pending {
			out = append(out, e.Name)
		}
		return out
	}
}

// TestPolicyPendingCleared: a restart a maintenance window holds is listed
// in status.pending until it is no longer needed: when the change is
// reverted (the ConfigMap back to what the Deployment's record holds;
// nothing restarts), and when a policy that held it, but does not name the
// changed ConfigMap, drops its windows (the restart is written for the
// other policy's source; the first policy's entry goes too).
func TestPolicyPendingCleared(t *testing.T) {
	t.Parallel()
	c := policies(t)
	ns := namespace(t)
	cm := configMap(ns, "shared", map[string]string{"k": "1"})
	other := configMap(ns, "other", map[string]string{"k": "1"})
	create(t, cm, other)
	api := track(t, deployment(ns, "api", envFrom("shared", "")))
	w := startWatcher(t, ns)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(w.logs)
		}
	})
	waitAdopted(t, deployment(ns, "api", corev1.PodSpec{}))
	target := v1alpha1.Target{Kind: v1alpha1.TargetDeployment, Name: "api"}
	p := reloadPolicy(ns, "p", []v1alpha1.Source{{Kind: v1alpha1.SourceConfigMap, Name: "shared"}}, target)
	p.Spec.MaintenanceWindows = closedWindow
	// q names only "other", but holds api's restarts outside its window.
	q := reloadPolicy(ns, "q", []v1alpha1.Source{{Kind: v1alpha1.SourceConfigMap, Name: "other"}}, target)
	q.Spec.MaintenanceWindows = closedWindow
	for _, x := range []*v1alpha1.ReloadPolicy{p, q} {
		if err := c.Create(ctx, x); err != nil {
			t.Fatal(err)
		}
		waitReady(t, c, x, metav1.ConditionTrue, policy.ReasonValid)
	}
	waitRecords(t, ns, "api", "ConfigMap/other")

	// Held, then reverted: nothing to restart, nothing pending.
	setConfigMap(t, cm, "k", "2")
	NewWithT(t).Eventually(pendingOf(t, c, p), wait).Should(Equal([]string{"api"}))
	NewWithT(t).Eventually(pendingOf(t, c, q), wait).Should(Equal([]string{"api"}))
	setConfigMap(t, cm, "k", "1")
	NewWithT(t).Eventually(pendingOf(t, c, p), wait).Should(BeEmpty(), "reverted: p still lists api")
	NewWithT(t).Eventually(pendingOf(t, c, q), wait).Should(BeEmpty(), "reverted: q still lists api")
	stayRollouts(t, api, 0)

	// Held again; p opens always, q drops its windows: written, for p.
	setConfigMap(t, cm, "k", "3")
	NewWithT(t).Eventually(pendingOf(t, c, q), wait).Should(Equal([]string{"api"}))
	editPolicy(t, c, p, func(p *v1alpha1.ReloadPolicy) {
		p.Spec.MaintenanceWindows = []v1alpha1.MaintenanceWindow{{Schedule: "* * * * *", Duration: metav1.Duration{Duration: time.Hour}}}
	})
	editPolicy(t, c, q, func(q *v1alpha1.ReloadPolicy) { q.Spec.MaintenanceWindows = nil })
	waitRollouts(t, api, 1)
	NewWithT(t).Eventually(pendingOf(t, c, p), wait).Should(BeEmpty(), "restarted: p still lists api")
	NewWithT(t).Eventually(pendingOf(t, c, q), wait).Should(BeEmpty(), "restarted: q, without windows now, still lists api")
}

// TestPolicyTooLarge: a policy over a limit watcher checks (here a target
// selector of more than policy.MaxSelectorTerms requirements, which the
// CRD does not bound) is not Ready, reason TooLarge, and applies to
// nothing: its target gets no reference from it. Made smaller, it applies.
func TestPolicyTooLarge(t *testing.T) {
	t.Parallel()
	c := policies(t)
	ns := namespace(t)
	create(t, configMap(ns, "shared", map[string]string{"k": "1"}))
	track(t, deployment(ns, "api", podSpec(corev1.Container{})))
	startWatcher(t, ns)
	many := map[string]string{}
	for i := 0; i <= policy.MaxSelectorTerms; i++ {
		many["l"+strings.Repeat("x", i)] = "v"
	}
	p := reloadPolicy(ns, "big", []v1alpha1.Source{{Kind: v1alpha1.SourceConfigMap, Name: "shared"}},
		v1alpha1.Target{Kind: v1alpha1.TargetDeployment, Selector: &metav1.LabelSelector{MatchLabels: many}},
		v1alpha1.Target{Kind: v1alpha1.TargetDeployment, Name: "api"})
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	cond := waitReady(t, c, p, metav1.ConditionFalse, policy.ReasonTooLarge)
	NewWithT(t).Expect(cond.Message).To(ContainSubstring("spec.targets[0].selector: 33 requirements, more than 32"))
	NewWithT(t).Consistently(func() string {
		return fetch(t, deployment(ns, "api", corev1.PodSpec{})).Annotations[plan.RecordAnnotation]
	}, quiet, 20*time.Millisecond).ShouldNot(ContainSubstring("ConfigMap/shared"))

	editPolicy(t, c, p, func(p *v1alpha1.ReloadPolicy) { p.Spec.Targets = p.Spec.Targets[1:] })
	waitReady(t, c, p, metav1.ConditionTrue, policy.ReasonValid)
	waitRecords(t, ns, "api", "ConfigMap/shared")
}
