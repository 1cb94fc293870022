package integration

import (
	"bytes"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/common/expfmt"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// TestSecretValuesNeverLeak runs Secrets through every path watcher has
// (adoption, change, restart, opt-out, an invalid annotation, deletion) and
// then searches every log line (watcher's at debug level, and client-go's),
// every Event and every metric for their values.
func TestSecretValuesNeverLeak(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	const v1, v2, v3 = "TOPSECRET-one-7f3a", "TOPSECRET-two-91bc", "TOPSECRET-three-c0de"
	sec := secret(ns, "sec", map[string]string{"password": v1})
	// kubectl apply keeps a full copy of the Secret in an annotation.
	sec.Annotations = map[string]string{
		"kubectl.kubernetes.io/last-applied-configuration": `{"stringData":{"password":"` + v1 + `"}}`,
		"require-restart": v1, // nonsense here on purpose: an invalid value
	}
	optedOut := secret(ns, "opted-out", map[string]string{"token": v1})
	optedOut.Annotations = map[string]string{"require-restart": "false"}
	create(t, sec, optedOut)
	dep := track(t, deployment(ns, "web", envFrom("", "sec")))
	other := track(t, deployment(ns, "other", envFrom("", "opted-out")))
	w := startWatcher(t, ns)
	waitAdopted(t, deployment(ns, "web", corev1.PodSpec{}))
	waitAdopted(t, deployment(ns, "other", corev1.PodSpec{}))

	setSecret(t, sec, "password", v2)
	waitRollouts(t, dep, 1)
	setSecret(t, optedOut, "token", v3)
	waitLog(t, w, "the object opted out", "Secret "+ns+"/opted-out")
	stayRollouts(t, other, 0)
	NewWithT(t).Expect(k8s.Delete(ctx, optedOut)).To(Succeed())
	waitLog(t, w, "Deleted; workloads using it keep running")

	var texts []string
	texts = append(texts, w.logs.String(), klogs.String())
	var events eventsv1.EventList
	NewWithT(t).Expect(k8s.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
	NewWithT(t).Expect(events.Items).NotTo(BeEmpty())
	for _, e := range events.Items {
		texts = append(texts, e.Note, e.Reason, e.Action)
	}
	families, err := ctrlmetrics.Registry.Gather()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	var buf bytes.Buffer
	for _, f := range families {
		_, _ = expfmt.MetricFamilyToText(&buf, f)
	}
	texts = append(texts, buf.String())
	waitRestarted(t, ns, "web", "Secret sec changed (keys: password;")
	for _, text := range texts {
		for _, v := range []string{v1, v2, v3, "TOPSECRET"} {
			NewWithT(t).Expect(text).NotTo(ContainSubstring(v))
		}
	}
}
