package integration

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/slim"
	"github.com/watcher-dev/watcher/internal/store"
	"github.com/watcher-dev/watcher/test/fixture"
)

// oddNames are names and keys that the API server accepts in the volumes
// of a pod spec (it checks only that they are not empty) and that mean
// something in watcher's encoding of references.
var oddNames = []string{"x;y", "a:b", "a,b", "*", "%", "a/b", "!", "%3B", "ünï", "a b"}

// oddNamesSpec mounts a ConfigMap and a Secret of each odd name, whole and
// through a projected volume, none of which can exist.
func oddNamesSpec() corev1.PodSpec {
	var vols []corev1.Volume
	var sources []corev1.VolumeProjection
	for i, n := range oddNames {
		vols = append(vols,
			corev1.Volume{Name: fmt.Sprintf("cm-%d", i), VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: n}}}},
			corev1.Volume{Name: fmt.Sprintf("sec-%d", i), VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: n}}},
		)
		sources = append(sources, corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: n + "-projected"},
			Items:                []corev1.KeyToPath{{Key: n, Path: fmt.Sprintf("p%d", i)}},
		}})
	}
	vols = append(vols, corev1.Volume{Name: "projected", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: sources}}})
	return podSpec(corev1.Container{}, vols...)
}

// oddKeysSpec mounts the items key and every odd key of ConfigMap cm, once
// required and once optional.
func oddKeysSpec(cm, key string) corev1.PodSpec {
	items := []corev1.KeyToPath{{Key: key, Path: "key"}}
	for i, n := range oddNames {
		items = append(items, corev1.KeyToPath{Key: n, Path: fmt.Sprintf("odd-%d", i)})
	}
	volume := func(name string, optional bool) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: cm}, Items: items, Optional: ptr.To(optional),
		}}}
	}
	// Optional: a non-optional volume whose items name keys the ConfigMap
	// lacks could start no pod, and watcher holds its restarts (see
	// TestMissingRequiredKeyHoldsRestart).
	return podSpec(corev1.Container{}, volume("optional", true), volume("optional-too", true))
}

// TestOddReferences runs watcher next to workloads whose references have
// names and keys that are legal but odd. Such a workload used to make the
// store's index function fail, client-go panic and watcher crash-loop: now
// watcher stays ready, adopts them, and restarts the ordinary workloads of
// the same namespace as before.
func TestOddReferences(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1", "b": "1"})
	create(t, cm)
	indexErrors := testutil.ToFloat64(metrics.Errors.WithLabelValues(store.ErrorOperation))
	transformErrors := testutil.ToFloat64(metrics.Errors.WithLabelValues(slim.ErrorOperation))

	web := track(t, deployment(ns, "web", envFrom("cfg", "")))
	oddKeys := track(t, deployment(ns, "odd-keys", oddKeysSpec("cfg", "a")))
	oddNamed := deployment(ns, "odd-names", oddNamesSpec())
	create(t, oddNamed)
	addr := fixture.FreeAddr(t)
	w := startWatcher(t, ns, func(o *options.Options) { o.HealthAddr = addr })
	// One more arrives through the watch rather than the initial list.
	oddLater := deployment(ns, "odd-later", oddNamesSpec())
	create(t, oddLater)
	for _, d := range []string{"web", "odd-keys"} {
		waitAdopted(t, deployment(ns, d, corev1.PodSpec{}))
	}
	// The odd names can belong to no ConfigMap or Secret: such a workload
	// can never be restarted, so nothing is written to it.
	for _, d := range []string{"odd-names", "odd-later"} {
		NewWithT(t).Consistently(func() map[string]string { return fetch(t, deployment(ns, d, corev1.PodSpec{})).Annotations }, quiet).
			ShouldNot(HaveKey(plan.RecordAnnotation), "%s written", d)
	}

	// A key odd-keys does not read restarts only web.
	setConfigMap(t, cm, "b", "2")
	waitRollouts(t, web, 1)
	// A key both read restarts both, once.
	setConfigMap(t, cm, "a", "2")
	waitRollouts(t, web, 2)
	waitRollouts(t, oddKeys, 1)
	waitRestarted(t, ns, "odd-keys", "ConfigMap cfg changed (keys: a;")
	stayReady(t, addr)
	stayRollouts(t, web, 2)
	stayRollouts(t, oddKeys, 1)

	g := NewWithT(t)
	g.Expect(w.logs.Lines("Reconciler error")).To(BeEmpty(), "logs:\n%s", w.logs)
	g.Expect(testutil.ToFloat64(metrics.Errors.WithLabelValues(store.ErrorOperation))).To(Equal(indexErrors), "workloads that could not be indexed")
	g.Expect(testutil.ToFloat64(metrics.Errors.WithLabelValues(slim.ErrorOperation))).To(Equal(transformErrors), "workloads that could not be trimmed")
}

// stayReady checks that the watcher serving health checks on addr stays
// ready for a while.
func stayReady(t *testing.T, addr string) {
	t.Helper()
	NewWithT(t).Consistently(func() (int, error) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}, quiet, 50*time.Millisecond).Should(Equal(http.StatusOK))
}
