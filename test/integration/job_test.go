package integration

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/hold"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/test/fixture"
)

// job returns a Job running spec once, with annotations.
func job(ns, name string, spec corev1.PodSpec, annotations map[string]string) *batchv1.Job {
	spec.RestartPolicy = corev1.RestartPolicyNever
	j := &batchv1.Job{ObjectMeta: fixture.Meta(ns, name), Spec: batchv1.JobSpec{
		Template: corev1.PodTemplateSpec{Spec: spec},
	}}
	j.Annotations = annotations
	return j
}

// uidOf returns the UID of the Job named like j, "" when there is none.
func uidOf(t *testing.T, j *batchv1.Job) types.UID {
	t.Helper()
	cur := &batchv1.Job{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: j.Namespace, Name: j.Name}, cur); err != nil {
		return ""
	}
	return cur.UID
}

// TestJobRecreated: under the default discovery (all), a Job that opts in
// with Reloader's annotation is adopted, and when its ConfigMap changes it
// is deleted and created again from its spec, as Reloader does: same name,
// a new UID, the new record and the restart's mark on it, a selector
// generated for the new UID, the Restarted Event and the guards' state on
// the new Job; it is not re-created again for the same configuration. A
// Job that does not opt in is never written, even under discovery all.
func TestJobRecreated(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	migrate := job(ns, "migrate", envFrom("cfg", ""), map[string]string{optin.ReloaderAuto: "true"})
	plain := job(ns, "plain", envFrom("cfg", ""), nil)
	create(t, migrate, plain)
	oldUID, plainUID := uidOf(t, migrate), uidOf(t, plain)
	startWatcher(t, ns)
	waitAdopted(t, migrate)
	adopted := fetch(t, &batchv1.Job{ObjectMeta: migrate.ObjectMeta}).Annotations[plan.RecordAnnotation]

	setConfigMap(t, cm, "a", "2")
	g.Eventually(func() types.UID { return uidOf(t, migrate) }, wait, 20*time.Millisecond).
		ShouldNot(Or(Equal(oldUID), BeEmpty()), "the Job is re-created")
	waitRestarted(t, ns, "migrate", "ConfigMap cfg")
	cur := fetch(t, &batchv1.Job{ObjectMeta: migrate.ObjectMeta})
	g.Expect(cur.Annotations).To(HaveKeyWithValue(optin.ReloaderAuto, "true"), "the owner's annotations are kept")
	g.Expect(cur.Annotations[plan.RecordAnnotation]).NotTo(Or(BeEmpty(), Equal(adopted)), "the new record is on the new Job")
	g.Expect(cur.Spec.Template.Annotations).To(HaveKey(plan.RestartAnnotation), "the strategy's mark")
	g.Expect(cur.Spec.Selector.MatchLabels).To(HaveKeyWithValue(batchv1.ControllerUidLabel, string(cur.UID)), "a selector for the new UID")
	g.Eventually(func() map[string]string { return fetch(t, cur).Annotations }, wait, 20*time.Millisecond).
		Should(HaveKey(guard.StateAnnotation), "the guards' state, bound to the new UID")

	newUID := cur.UID
	g.Consistently(func() types.UID { return uidOf(t, migrate) }, quiet, 50*time.Millisecond).
		Should(Equal(newUID), "re-created once for one change")
	g.Expect(events(t, ns, "migrate", "Restarted")).To(HaveLen(1))

	p := fetch(t, plain)
	g.Expect(p.UID).To(Equal(plainUID), "the Job that does not opt in is not re-created")
	g.Expect(p.Annotations).NotTo(HaveKey(plan.RecordAnnotation), "nor written")
}

// TestJobIgnored: with --ignore-workload-kinds Job (what Reloader's
// --ignored-workload-types jobs maps to), a Job that opts in is neither
// adopted nor re-created when its ConfigMap changes; a Deployment using it
// is restarted.
func TestJobIgnored(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	migrate := job(ns, "migrate", envFrom("cfg", ""), map[string]string{optin.ReloaderAuto: "true"})
	create(t, migrate)
	uid := uidOf(t, migrate)
	dep := track(t, deployment(ns, "web", envFrom("cfg", "")))
	startWatcher(t, ns, func(o *options.Options) { o.IgnoreWorkloadKinds = []string{"Job"} })
	waitAdopted(t, &appsv1.Deployment{ObjectMeta: fixture.Meta(ns, "web")})

	setConfigMap(t, cm, "a", "2")
	waitRollouts(t, dep, 1)
	g.Consistently(func() types.UID { return uidOf(t, migrate) }, quiet, 50*time.Millisecond).
		Should(Equal(uid), "the Job is not re-created")
	g.Expect(fetch(t, migrate).Annotations).NotTo(HaveKey(plan.RecordAnnotation), "nor adopted")
}

// TestJobRecreateRefused: when the API server would refuse the new Job (here
// an admission policy of the test's namespace refuses every Job carrying
// watcher's record), the Job is not deleted: it keeps its UID, and a
// Warning Event RecreateFailed says why.
func TestJobRecreateRefused(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	refuseRecordedJobs(t, ns)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	migrate := job(ns, "migrate", envFrom("cfg", ""), map[string]string{optin.Auto: "true"})
	create(t, migrate)
	uid := uidOf(t, migrate)
	// The policy is in force once a dry-run create of such a Job fails.
	probe := job(ns, "probe", envFrom("cfg", ""), map[string]string{plan.RecordAnnotation: "x"})
	g.Eventually(func() error { return k8s.Create(ctx, probe.DeepCopy(), client.DryRunAll) }, wait, 100*time.Millisecond).
		Should(HaveOccurred(), "the admission policy is in force")
	startWatcher(t, ns)
	waitAdopted(t, migrate)

	setConfigMap(t, cm, "a", "2")
	waitEvent(t, ns, "migrate", restart.ReasonRecreateFailed, "Cannot re-create the Job", "no recorded Jobs here")
	g.Consistently(func() types.UID { return uidOf(t, migrate) }, quiet, 50*time.Millisecond).
		Should(Equal(uid), "the Job is not deleted")
	g.Expect(events(t, ns, "migrate", "Restarted")).To(BeEmpty())
}

// refuseRecordedJobs installs, for the test, a ValidatingAdmissionPolicy
// that refuses, in namespace ns only, every Job carrying watcher's record.
func refuseRecordedJobs(t *testing.T, ns string) {
	t.Helper()
	name := "refuse-recorded-jobs-" + ns
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}},
				}}},
			},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "!has(object.metadata.annotations) || !('" + plan.RecordAnnotation + "' in object.metadata.annotations)",
				Message:    "no recorded Jobs here",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	create(t, policy, binding)
	t.Cleanup(func() {
		_ = k8s.Delete(ctx, binding)
		_ = k8s.Delete(ctx, policy)
	})
}

// TestJobBudgetSurvivesRecreation: the guards hold a Job as any workload.
// Under a budget of one restart an hour, a Job re-created for a change is
// held at the next one, even by a new watcher process: the restart state
// is written on the new Job, bound to its new UID.
func TestJobBudgetSurvivesRecreation(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	budget := func(o *options.Options) { o.RestartBudget = options.Rate{Count: 1, Per: time.Hour} }
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	migrate := job(ns, "migrate", envFrom("cfg", ""), map[string]string{optin.Auto: "true"})
	create(t, migrate)
	first := uidOf(t, migrate)
	w := startWatcher(t, ns, budget)
	waitAdopted(t, migrate)
	setConfigMap(t, cm, "a", "2")
	g.Eventually(func() types.UID { return uidOf(t, migrate) }, wait, 20*time.Millisecond).
		ShouldNot(Or(Equal(first), BeEmpty()), "re-created for the first change")
	g.Eventually(func() map[string]string { return fetch(t, migrate).Annotations }, wait, 20*time.Millisecond).
		Should(HaveKey(guard.StateAnnotation))
	second := uidOf(t, migrate)
	w.Stop()

	startWatcher(t, ns, budget)
	setConfigMap(t, cm, "a", "3")
	g.Eventually(func() []string { return events(t, ns, "migrate", hold.ReasonRestartHeld) }, wait, 20*time.Millisecond).
		Should(ContainElement(ContainSubstring("Restart held (budget)")))
	g.Expect(uidOf(t, migrate)).To(Equal(second), "held: not re-created again")
}
