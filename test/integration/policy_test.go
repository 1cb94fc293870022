package integration

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/api/v1alpha1"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/policy"
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
