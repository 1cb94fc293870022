package integration

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/watcher-dev/watcher/internal/cause"
	"github.com/watcher-dev/watcher/internal/cli"
	"github.com/watcher-dev/watcher/internal/explain"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/plan"
)

// TestExplainAgreesWithController: for a workload in each row of the
// decision table (package plan), `watcher explain`, run while the
// controller is stopped, predicts the action the controller then takes
// when it starts: restart, adopt, refresh, forget or none. The action
// taken is read from the cluster (a Restarted Event, the record and its
// key), not from the controller.
func TestExplainAgreesWithController(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	optOut := map[string]string{options.Defaults().Annotation: "false"}
	cms := map[string]map[string]string{
		"changed": {"a": "1"}, "unread": {"a": "1", "b": "1"}, "fresh": {"a": "1"}, "optout": {"a": "1"},
		"needs": {"k": "1"}, "ignored": {"a": "1"}, "deleted": {"a": "1"}, "otherkey": {"a": "1"},
	}
	for name, data := range cms {
		create(t, configMap(ns, name, data))
	}
	workloads := map[string]corev1.PodSpec{
		"changed":  envFrom("changed", ""),
		"unread":   podSpec(corev1.Container{Env: []corev1.EnvVar{keyRef("A", "unread", "a", false)}}),
		"optout":   envFrom("optout", ""),
		"created":  podSpec(corev1.Container{EnvFrom: envFrom("fresh", "").Containers[0].EnvFrom, Env: []corev1.EnvVar{keyRef("LATE", "late", "x", true)}}),
		"needs":    podSpec(corev1.Container{Env: []corev1.EnvVar{keyRef("K", "needs", "k", false)}}),
		"ignored":  envFrom("ignored", ""),
		"deleted":  envFrom("deleted", ""),
		"otherkey": envFrom("otherkey", ""),
		"same":     envFrom("fresh", ""),
		"emptied":  envFrom("fresh", ""),
	}
	for name, spec := range workloads {
		create(t, deployment(ns, name, spec))
	}
	w := startWatcher(t, ns, func(o *options.Options) { o.Namespace = ns })
	for name := range workloads {
		waitAdopted(t, deployment(ns, name, corev1.PodSpec{}))
	}
	w.Stop()

	// While the controller is stopped, one change per row.
	before := map[string]map[string]string{}
	setConfigMap(t, configMap(ns, "changed", nil), "a", "2")                                                                                         // a key read changed: restart
	setConfigMap(t, configMap(ns, "unread", nil), "b", "2")                                                                                          // a key not read changed: none
	create(t, deployment(ns, "fresh", envFrom("fresh", "")))                                                                                         // no record: adopt
	create(t, configMap(ns, "late", map[string]string{"x": "1"}))                                                                                    // created since the record: refresh
	edit(t, deployment(ns, "optout", corev1.PodSpec{}), func(d *appsv1.Deployment) { d.Annotations = optOut })                                       // forget
	edit(t, configMap(ns, "needs", nil), func(c *corev1.ConfigMap) { c.Data = map[string]string{"other": "1"} })                                     // a required key gone: none
	edit(t, configMap(ns, "ignored", nil), func(c *corev1.ConfigMap) { c.Annotations, c.Data["a"] = optOut, "2" })                                   // opted out: refresh
	g.Expect(k8s.Delete(ctx, configMap(ns, "deleted", nil))).To(Succeed())                                                                           // deletion: none
	edit(t, deployment(ns, "otherkey", corev1.PodSpec{}), func(d *appsv1.Deployment) { d.Annotations[plan.HashKeyAnnotation] = "0000000000000000" }) // adopt
	names := append(mapsKeys(workloads), "fresh")
	for _, name := range names {
		before[name] = fetch(t, deployment(ns, name, corev1.PodSpec{})).Annotations
	}

	kubeconfig := writeKubeconfig(t)
	predicted := map[string]string{}
	for _, name := range names {
		var out, errOut bytes.Buffer
		args := []string{"watcher", "explain", "deployment/" + name, "-o", "json", "-n", ns, "--kubeconfig", kubeconfig, "--watcher-namespace", ns}
		g.Expect(cli.Main(ctx, args, &out, &errOut)).To(Equal(0), errOut.String())
		var rep explain.WorkloadReport
		g.Expect(json.Unmarshal(out.Bytes(), &rep)).To(Succeed())
		predicted[name] = rep.Action
	}
	// The rows are all there: the test covers every action.
	g.Expect(predicted).To(Equal(map[string]string{
		"changed": "restart", "unread": "none", "fresh": "adopt", "created": "refresh", "optout": "none", "emptied": "none",
		"needs": "none", "ignored": "refresh", "deleted": "none", "otherkey": "adopt", "same": "none",
	}), "explain's predictions")

	taken := func() map[string]string {
		out := map[string]string{}
		for _, name := range names {
			now := fetch(t, deployment(ns, name, corev1.PodSpec{})).Annotations
			was := before[name]
			switch {
			case len(events(t, ns, name, cause.ReasonRestarted)) > 0:
				out[name] = "restart"
			case was[plan.RecordAnnotation] != "" && now[plan.RecordAnnotation] == "":
				out[name] = "forget"
			case now[plan.RecordAnnotation] != "" && (was[plan.RecordAnnotation] == "" || was[plan.HashKeyAnnotation] != now[plan.HashKeyAnnotation]):
				out[name] = "adopt"
			case now[plan.RecordAnnotation] != was[plan.RecordAnnotation]:
				out[name] = "refresh"
			default:
				out[name] = "none"
			}
		}
		return out
	}
	startWatcher(t, ns, func(o *options.Options) { o.Namespace = ns })
	g.Eventually(taken, wait, 100*time.Millisecond).Should(Equal(predicted), "what the controller did")
	g.Consistently(taken, 2*time.Second, 200*time.Millisecond).Should(Equal(predicted), "what the controller did")
}

func mapsKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
