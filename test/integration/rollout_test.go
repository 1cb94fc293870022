package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/workload"
	"github.com/watcher-dev/watcher/test/fixture"
	"github.com/watcher-dev/watcher/test/observe"
)

// rolloutCRD reads Argo Rollouts' own Rollout CRD, which hack/crds.sh
// copies out of the argo-rollouts Go module.
func rolloutCRD(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	return cachedCRD(t, "rollout-crd.yaml")
}

// cachedCRD reads file from the folder hack/crds.sh fills (with args, the
// CRDs of another module).
func cachedCRD(t *testing.T, file string, args ...string) *unstructured.Unstructured {
	t.Helper()
	out, err := exec.Command("bash", append([]string{filepath.Join("..", "..", "hack", "crds.sh")}, args...)...).Output()
	if err != nil {
		t.Fatalf("hack/crds.sh: %v", err)
	}
	f, err := os.Open(filepath.Join(strings.TrimSpace(string(out)), file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	crd := &unstructured.Unstructured{}
	if err := yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(&crd.Object); err != nil {
		t.Fatalf("read %s: %v", file, err)
	}
	return crd
}

// rollout returns an Argo Rollout of the given spec, with a canary strategy.
func rollout(t *testing.T, ns, name string, spec map[string]any) *unstructured.Unstructured {
	t.Helper()
	spec["strategy"] = map[string]any{"canary": map[string]any{}}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(workload.Rollout.GVK)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// withTemplate is the spec of a Rollout whose template reads ConfigMap cm.
func withTemplate(t *testing.T, name, cm string) map[string]any {
	t.Helper()
	tmpl := deployment("", name, envFrom(cm, "")).Spec.Template
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&tmpl)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{"replicas": int64(1), "selector": map[string]any{"matchLabels": map[string]any{"app": name}}, "template": m}
}

// errorsTotal sums watcher_errors_total over its operations.
func errorsTotal(t *testing.T) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	go func() { metrics.Errors.Collect(ch); close(ch) }()
	sum := 0.0
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		sum += d.GetCounter().GetValue()
	}
	return sum
}

// TestRollout: watcher starts without Argo's Rollout CRD and is ready; the
// CRD is installed (Argo's own, from its Go module) and within seconds a
// Rollout using a ConfigMap is adopted, and a change rolls its template
// once. A Rollout whose template lives in a referenced Deployment
// (workloadRef) has no references of its own: never written, no error.
// The CRD is deleted: watcher stays ready, no error repeats, and other
// workloads still restart.
//
// Not parallel: the CRD is cluster-wide, and the global error counter
// must hold still while this test reads it.
func TestRollout(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	crd := rolloutCRD(t)
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(crd), crd.DeepCopy()); !apierrors.IsNotFound(err) {
		t.Fatalf("the Rollout CRD is already there (%v)", err)
	}
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	web := track(t, deployment(ns, "web", envFrom("cfg", "")))
	errs := errorsTotal(t)
	addr := fixture.FreeAddr(t)
	w := startWatcher(t, ns, func(o *options.Options) { o.HealthAddr = addr })
	waitAdopted(t, deployment(ns, "web", envFrom("cfg", "")))

	create(t, crd)
	t.Cleanup(func() { _ = k8s.Delete(ctx, crd) })
	installed := time.Now()
	var canary *observe.Tracker
	g.Eventually(func() error { // until the API server serves Rollouts
		var err error
		canary, err = observe.Track(t.Context(), restConfig, rollout(t, ns, "canary", withTemplate(t, "canary", "cfg")))
		return err
	}, wait, 100*time.Millisecond).Should(Succeed())
	byRef := rollout(t, ns, "by-ref", map[string]any{
		"replicas":    int64(1),
		"workloadRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
	})
	create(t, byRef)
	// Reloader's rollout-strategy "restart": spec.restartAt, not the
	// template.
	byRestart := rollout(t, ns, "by-restart", withTemplate(t, "by-restart", "cfg"))
	byRestart.SetAnnotations(map[string]string{optin.RolloutStrategy: "restart"})
	create(t, byRestart)
	waitAdopted(t, rollout(t, ns, "canary", map[string]any{}))
	waitAdopted(t, rollout(t, ns, "by-restart", map[string]any{}))
	restartTemplate, _, _ := unstructured.NestedMap(fetch(t, byRestart).Object, "spec", "template")
	t.Logf("Rollout adopted %s after the CRD was created", time.Since(installed).Round(time.Millisecond))
	waitLog(t, w, `"msg"="Kind served; watching it"`, `"kind"="Rollout"`)

	setConfigMap(t, cm, "a", "2")
	waitRollouts(t, canary, 1)
	waitRollouts(t, web, 1)
	stayRollouts(t, canary, 1)
	g.Eventually(func() string {
		v, _, _ := unstructured.NestedString(fetch(t, byRestart).Object, "spec", "restartAt")
		return v
	}, wait).ShouldNot(BeEmpty(), "Reloader's rollout-strategy restart sets spec.restartAt")
	after, _, _ := unstructured.NestedMap(fetch(t, byRestart).Object, "spec", "template")
	g.Expect(after).To(Equal(restartTemplate), "and leaves the template alone")
	g.Expect(fetch(t, byRef).GetAnnotations()).NotTo(HaveKey(plan.RecordAnnotation), "a workloadRef Rollout has no references of its own")

	if err := k8s.Delete(ctx, crd); err != nil {
		t.Fatal(err)
	}
	waitLog(t, w, `"msg"="Kind no longer served; stopped watching it"`, `"kind"="Rollout"`)
	g.Expect(errorsTotal(t)).To(Equal(errs), "watcher_errors_total before the CRD went (the workloadRef Rollout is no error)")
	klogLines := len(klogs.Lines("rollouts"))
	stayReady(t, addr)
	time.Sleep(3 * time.Second) // a while after the CRD went
	stayReady(t, addr)
	g.Expect(errorsTotal(t)).To(Equal(errs), "watcher_errors_total")
	g.Expect(klogs.Lines("rollouts")).To(HaveLen(klogLines), "client-go keeps failing on rollouts:\n%s", klogs)
	g.Expect(w.logs.Lines("Reconciler error")).To(BeEmpty(), "logs:\n%s", w.logs)

	setConfigMap(t, cm, "a", "3")
	waitRollouts(t, web, 2)
}
