package integration

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/watcher-dev/watcher/internal/cause"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/plan"
)

func TestMetadataOnlyEditRestartsNothing(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	dep := track(t, deployment(ns, "web", envFrom("cfg", "")))
	w := startWatcher(t, ns)
	waitAdopted(t, deployment(ns, "web", corev1.PodSpec{}))

	edit(t, cm, func(cm *corev1.ConfigMap) {
		cm.Labels = map[string]string{"team": "blue"}
		cm.Annotations = map[string]string{"note": "edited"}
	})
	waitLog(t, w, "Metadata changed, data did not", "ConfigMap "+ns+"/cfg", plan.SkipMetadataOnly)
	stayRollouts(t, dep, 0)

	// Writing the same data again is no change either.
	setConfigMap(t, cm, "a", "1")
	setConfigMap(t, cm, "a", "2")
	waitRollouts(t, dep, 1)
	stayRollouts(t, dep, 1)
}

func TestOnlyUsedKeysRestart(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1", "b": "1"})
	create(t, cm)
	spec := podSpec(corev1.Container{Env: []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "a"}}}}})
	keyUser := track(t, deployment(ns, "key-user", spec))
	allUser := track(t, deployment(ns, "all-user", envFrom("cfg", "")))
	w := startWatcher(t, ns)
	waitAdopted(t, deployment(ns, "key-user", corev1.PodSpec{}))
	waitAdopted(t, deployment(ns, "all-user", corev1.PodSpec{}))

	setConfigMap(t, cm, "b", "2")
	waitLog(t, w, "Deployment "+ns+"/key-user", plan.SkipUnusedKeys)
	waitRollouts(t, allUser, 1)
	stayRollouts(t, keyUser, 0)

	// A new key counts for envFrom only; then a removed one.
	setConfigMap(t, cm, "c", "1")
	waitRollouts(t, allUser, 2)
	edit(t, cm, func(cm *corev1.ConfigMap) { delete(cm.Data, "c") })
	waitRollouts(t, allUser, 3)
	waitRestarted(t, ns, "all-user", "ConfigMap cfg changed (keys: c;")

	setConfigMap(t, cm, "a", "2")
	waitRollouts(t, keyUser, 1)
	waitRollouts(t, allUser, 4)
	stayRollouts(t, keyUser, 1)
}

func TestWorkloadOptOut(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	d := deployment(ns, "web", envFrom("cfg", ""))
	d.Annotations = map[string]string{"require-restart": "false"}
	dep := track(t, d)
	other := track(t, deployment(ns, "other", envFrom("cfg", "")))
	w := startWatcher(t, ns)
	waitAdopted(t, deployment(ns, "other", corev1.PodSpec{}))

	setConfigMap(t, cm, "a", "2")
	waitRollouts(t, other, 1)
	waitLog(t, w, "Deployment "+ns+"/web", plan.SkipWorkloadOptedOut)
	stayRollouts(t, dep, 0)
	NewWithT(t).Expect(fetch(t, deployment(ns, "web", corev1.PodSpec{})).Annotations).NotTo(HaveKey(plan.RecordAnnotation))

	// Opting back in adopts the current state: no restart for the past.
	edit(t, deployment(ns, "web", corev1.PodSpec{}), func(d *appsv1.Deployment) { delete(d.Annotations, "require-restart") })
	waitAdopted(t, deployment(ns, "web", corev1.PodSpec{}))
	stayRollouts(t, dep, 0)
	setConfigMap(t, cm, "a", "3")
	waitRollouts(t, dep, 1)
}

func TestCustomAnnotationAndConfigOptOut(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	cm.Annotations = map[string]string{"example.com/restart": "False"}
	sec := secret(ns, "sec", map[string]string{"s": "1"})
	create(t, cm, sec)
	dep := track(t, deployment(ns, "web", envFrom("cfg", "sec")))
	w := startWatcher(t, ns, func(o *options.Options) { o.Annotation = "example.com/restart" })
	waitAdopted(t, deployment(ns, "web", corev1.PodSpec{}))
	before := fetch(t, deployment(ns, "web", corev1.PodSpec{})).Annotations[plan.RecordAnnotation]

	setConfigMap(t, cm, "a", "2")
	waitLog(t, w, "the object opted out", "ConfigMap "+ns+"/cfg")
	// The change is recorded without a restart, so it never counts later.
	NewWithT(t).Eventually(func() string {
		return fetch(t, deployment(ns, "web", corev1.PodSpec{})).Annotations[plan.RecordAnnotation]
	}, wait).ShouldNot(Equal(before))
	stayRollouts(t, dep, 0)

	setSecret(t, sec, "s", "2")
	waitRollouts(t, dep, 1)
	waitRestarted(t, ns, "web", "Secret sec changed (keys: s;")
	NewWithT(t).Expect(events(t, ns, "web", cause.ReasonRestarted)).NotTo(ContainElement(ContainSubstring("ConfigMap")))
}

func TestIgnoredNamespaces(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	sec := secret(ns, "sec", map[string]string{"s": "1"})
	create(t, cm, sec)
	dep := track(t, deployment(ns, "web", envFrom("cfg", "sec")))
	startWatcher(t, ns, func(o *options.Options) {
		o.IgnoreConfigMapNamespaces = []string{"kube-system", ns}
	})
	waitAdopted(t, deployment(ns, "web", corev1.PodSpec{}))

	setConfigMap(t, cm, "a", "2")
	stayRollouts(t, dep, 0)
	setSecret(t, sec, "s", "2")
	waitRollouts(t, dep, 1)
	stayRollouts(t, dep, 1)
}

func TestDeletionRestartsNothing(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	dep := track(t, deployment(ns, "web", envFrom("cfg", "")))
	w := startWatcher(t, ns)
	waitAdopted(t, deployment(ns, "web", corev1.PodSpec{}))

	NewWithT(t).Expect(k8s.Delete(ctx, configMap(ns, "cfg", nil))).To(Succeed())
	waitLog(t, w, "Deleted; workloads using it keep running", "ConfigMap "+ns+"/cfg")
	// Recreated with the same content: the pods already have it.
	create(t, configMap(ns, "cfg", map[string]string{"a": "1"}))
	stayRollouts(t, dep, 0)
	// Changed after all: restart.
	setConfigMap(t, configMap(ns, "cfg", nil), "a", "2")
	waitRollouts(t, dep, 1)
}
