package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/plan"
)

// keyRef returns an env var reading key of ConfigMap cm.
func keyRef(name, cm, key string, optional bool) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: cm}, Key: key, Optional: ptr.To(optional),
	}}}
}

// cmVolume returns a volume of ConfigMap cm, with only items when given.
func cmVolume(cm string, items ...string) corev1.Volume {
	v := corev1.Volume{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: cm},
	}}}
	for _, k := range items {
		v.ConfigMap.Items = append(v.ConfigMap.Items, corev1.KeyToPath{Key: k, Path: k})
	}
	return v
}

// TestTemplateEditRollsOnce: a template edit that reads one more key of a
// ConfigMap already used, or switches a volume from items to the whole
// ConfigMap, rolls the pods once (the edit itself): watcher adopts the keys
// read for the first time instead of taking them for a change.
func TestTemplateEditRollsOnce(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	create(t, configMap(ns, "cfg", map[string]string{"a": "1", "b": "1"}))
	env := track(t, deployment(ns, "env", podSpec(corev1.Container{Env: []corev1.EnvVar{keyRef("A", "cfg", "a", false)}})))
	vol := track(t, deployment(ns, "vol", podSpec(corev1.Container{}, cmVolume("cfg", "a"))))
	startWatcher(t, ns)
	waitAdopted(t, deployment(ns, "env", corev1.PodSpec{}))
	waitAdopted(t, deployment(ns, "vol", corev1.PodSpec{}))

	edit(t, deployment(ns, "env", corev1.PodSpec{}), func(d *appsv1.Deployment) {
		c := &d.Spec.Template.Spec.Containers[0]
		c.Env = append(c.Env, keyRef("B", "cfg", "b", false))
	})
	edit(t, deployment(ns, "vol", corev1.PodSpec{}), func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Volumes[0].ConfigMap.Items = nil
	})
	for _, d := range []string{"env", "vol"} {
		NewWithT(t).Eventually(func() string {
			return fetch(t, deployment(ns, d, corev1.PodSpec{})).Annotations[plan.RecordAnnotation]
		}, wait).Should(Or(ContainSubstring(`"b":`), ContainSubstring(`"all":true`)), "the new keys recorded on %s", d)
	}
	stayRollouts(t, env, 1) // the user's own edit, and no second one
	stayRollouts(t, vol, 1)

	setConfigMap(t, configMap(ns, "cfg", nil), "b", "2")
	waitRollouts(t, env, 2)
	waitRollouts(t, vol, 2)
}

// TestMissingRequiredKeyHoldsRestart: removing a key that a non-optional
// keyRef needs restarts nothing (new pods would be stuck) and says so in a
// Warning Event; when the key comes back with new content, the workload
// rolls. A key read optionally restarts on removal as before.
func TestMissingRequiredKeyHoldsRestart(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1", "b": "1"})
	create(t, cm)
	need := track(t, deployment(ns, "need", podSpec(corev1.Container{Env: []corev1.EnvVar{keyRef("A", "cfg", "a", false)}})))
	opt := track(t, deployment(ns, "opt", podSpec(corev1.Container{Env: []corev1.EnvVar{keyRef("A", "cfg", "a", true)}})))
	startWatcher(t, ns)
	waitAdopted(t, deployment(ns, "need", corev1.PodSpec{}))
	waitAdopted(t, deployment(ns, "opt", corev1.PodSpec{}))

	edit(t, cm, func(cm *corev1.ConfigMap) { delete(cm.Data, "a") })
	waitRollouts(t, opt, 1)
	NewWithT(t).Eventually(func() []string { return events(t, ns, "need", "MissingKey") }, wait).
		Should(ContainElement(ContainSubstring("ConfigMap cfg has no key a")))
	stayRollouts(t, need, 0)

	setConfigMap(t, cm, "a", "2")
	waitRollouts(t, need, 1)
	waitRollouts(t, opt, 2)
}

// TestEventNoteFitsTheLimit: a restart for hundreds of changed keys still
// gets its Event (the API server refuses notes over 1,024 characters).
func TestEventNoteFitsTheLimit(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	data := map[string]string{}
	for i := range 300 {
		data[fmt.Sprintf("SOME_RATHER_LONG_SETTING_NAME_%03d", i)] = "1"
	}
	cm := configMap(ns, "cfg", data)
	create(t, cm)
	dep := track(t, deployment(ns, "web", envFrom("cfg", "")))
	startWatcher(t, ns)
	waitAdopted(t, deployment(ns, "web", corev1.PodSpec{}))
	edit(t, cm, func(cm *corev1.ConfigMap) {
		for k := range cm.Data {
			cm.Data[k] = "2"
		}
	})
	waitRollouts(t, dep, 1)
	NewWithT(t).Eventually(func() []string { return events(t, ns, "web", "Restarted") }, wait).
		Should(ContainElement(SatisfyAll(HavePrefix("Restarted because ConfigMap cfg changed"), WithTransform(func(s string) int { return len(s) }, BeNumerically("<=", 1024)))))
}

// TestNeverRestartedIsNeverWritten: a workload whose references all point
// into an ignored namespace, or at objects the config selector excludes, is
// not written at all.
func TestNeverRestartedIsNeverWritten(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	create(t, configMap(ns, "ignored", map[string]string{"a": "1"}))
	excluded := configMap(ns, "excluded", map[string]string{"a": "1"})
	excluded.Labels = map[string]string{"watch": "no"}
	create(t, excluded)
	included := configMap(ns, "included", map[string]string{"a": "1"})
	included.Labels = map[string]string{"watch": "yes"}
	create(t, included)
	create(t, secret(ns, "sec", map[string]string{"s": "1"}))
	onlyIgnored := deployment(ns, "only-ignored", envFrom("ignored", ""))
	onlyExcluded := deployment(ns, "only-excluded", envFrom("excluded", ""))
	control := deployment(ns, "control", envFrom("included", "sec"))
	create(t, onlyIgnored, onlyExcluded, control)
	startWatcher(t, ns, func(o *options.Options) {
		o.IgnoreConfigMapNamespaces = []string{ns}
		o.IgnoreSecretNamespaces = nil
		o.ConfigSelector = "watch!=no"
	})
	waitAdopted(t, control)
	NewWithT(t).Expect(fetch(t, control).Annotations[plan.RecordAnnotation]).NotTo(ContainSubstring("ConfigMap/"), "the ignored namespace's ConfigMap is not recorded")
	for _, d := range []*appsv1.Deployment{onlyIgnored, onlyExcluded} {
		NewWithT(t).Consistently(func() map[string]string { return fetch(t, d).Annotations }, quiet).
			ShouldNot(HaveKey(plan.RecordAnnotation), "%s written", d.Name)
	}
}

// TestLargeConfigMap: a workload reading a ConfigMap of 12,000 keys through
// envFrom is recorded within the annotation size limit and restarted when
// one key changes.
func TestLargeConfigMap(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	data := make(map[string]string, 12000)
	for i := range 12000 {
		data[fmt.Sprintf("FLAG_%05d", i)] = "on"
	}
	cm := configMap(ns, "flags", data)
	create(t, cm)
	dep := track(t, deployment(ns, "web", envFrom("flags", "")))
	startWatcher(t, ns)
	waitAdopted(t, deployment(ns, "web", corev1.PodSpec{}))
	rec := fetch(t, deployment(ns, "web", corev1.PodSpec{})).Annotations[plan.RecordAnnotation]
	NewWithT(t).Expect(len(rec)).To(BeNumerically("<=", plan.RecordBudget))
	setConfigMap(t, cm, "FLAG_00042", "off")
	waitRollouts(t, dep, 1)
	stayRollouts(t, dep, 1)
}

// exited waits until w stops by itself and returns its error.
func exited(t *testing.T, w *instance) error {
	t.Helper()
	select {
	case err := <-w.done:
		w.cancel()
		w.cancel = nil
		return err
	case <-time.After(wait):
		t.Fatalf("watcher did not stop\n%s", w.logs)
		return nil
	}
}

// settled waits until the resourceVersion of w stops moving.
func settled(t *testing.T, w client.Object) {
	t.Helper()
	last := ""
	NewWithT(t).Eventually(func() bool {
		rv := fetch(t, w).GetResourceVersion()
		same := rv == last
		last = rv
		return same
	}, wait, quiet).Should(BeTrue(), "%s keeps being written", w.GetName())
}

// TestHashKeyRotation: replicas never decide with different hash keys. A
// deleted key Secret is created again with the same key by the replicas
// running, so nothing is adopted and changes still restart; a key Secret
// rewritten with another key stops every replica that holds the old one, and
// a replica started with the new key adopts the workloads once, after which
// they settle and changes restart them.
func TestHashKeyRotation(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	dep := deployment(ns, "web", envFrom("cfg", ""))
	tr := track(t, dep)
	own := func(o *options.Options) { o.Namespace = ns }
	a, b := startWatcher(t, ns, own), startWatcher(t, ns, own)
	waitAdopted(t, dep)
	keyID := fetch(t, dep).Annotations[plan.HashKeyAnnotation]
	key := &corev1.Secret{}
	key.Namespace, key.Name = ns, options.Defaults().HashKeySecret
	old := fetch(t, key).Data["key"]

	// Deleted: put back with the same key.
	if err := k8s.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	NewWithT(t).Eventually(func() []byte {
		s := &corev1.Secret{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(key), s); err != nil {
			return nil
		}
		return s.Data["key"]
	}, wait).Should(Equal(old))
	setConfigMap(t, cm, "a", "2")
	waitRollouts(t, tr, 1)
	NewWithT(t).Expect(fetch(t, dep).Annotations[plan.HashKeyAnnotation]).To(Equal(keyID))

	// Rewritten with another key: both stop, nothing decided with the old one.
	edit(t, key, func(s *corev1.Secret) { s.Data["key"] = []byte("a-brand-new-key-of-32-bytes-long") })
	for _, w := range []*instance{a, b} {
		NewWithT(t).Expect(exited(t, w)).To(MatchError(ContainSubstring("hash key")))
	}
	c := startWatcher(t, ns, own)
	NewWithT(t).Eventually(func() string { return fetch(t, dep).Annotations[plan.HashKeyAnnotation] }, wait).ShouldNot(Equal(keyID))
	settled(t, dep)
	stayRollouts(t, tr, 1)
	setConfigMap(t, cm, "a", "3")
	waitRollouts(t, tr, 2)
	settled(t, dep)
	NewWithT(t).Expect(strings.Count(c.logs.String(), "Hash key changed")).To(Equal(0))
}

// TestOnDeleteIsHonest: a StatefulSet with updateStrategy OnDelete gets its
// template updated and its record written, but watcher does not claim a
// restart: it says that the pods pick up the change only when deleted.
func TestOnDeleteIsHonest(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	sts := statefulSet(ns, "db", envFrom("cfg", ""))
	sts.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType
	tr := track(t, sts)
	startWatcher(t, ns)
	waitAdopted(t, statefulSet(ns, "db", corev1.PodSpec{}))
	setConfigMap(t, cm, "a", "2")
	waitRollouts(t, tr, 1) // the template changed
	NewWithT(t).Eventually(func() []string { return events(t, ns, "db", "UpdatedOnDelete") }, wait).
		Should(ContainElement(ContainSubstring("pods pick up the change only when deleted (OnDelete)")))
	NewWithT(t).Expect(events(t, ns, "db", "Restarted")).To(BeEmpty())
}

// TestHashesAreNoOracle: the same password in Secrets of two namespaces, and
// under two keys of one Secret, is recorded with unrelated hashes, so a
// tenant cannot match hashes of guesses made in their own namespace against
// the records of another.
func TestHashesAreNoOracle(t *testing.T) {
	t.Parallel()
	mine := namespace(t)
	theirs := mine + "-theirs"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: theirs}})
	for _, ns := range []string{mine, theirs} {
		create(t, secret(ns, "db", map[string]string{"password": "admin", "guess": "admin"}))
		create(t, deployment(ns, "web", envFrom("", "db")))
	}
	startWatcher(t, mine, func(o *options.Options) { o.Namespaces = []string{mine, theirs} })
	hashes := map[string]string{}
	for _, ns := range []string{mine, theirs} {
		d := deployment(ns, "web", corev1.PodSpec{})
		waitAdopted(t, d)
		rec, err := plan.ParseRecord(fetch(t, d).Annotations[plan.RecordAnnotation])
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		for k, h := range rec["Secret/db"].Keys {
			hashes[ns+"/"+k] = h
		}
	}
	seen := map[string]string{}
	for where, h := range hashes {
		NewWithT(t).Expect(seen).NotTo(HaveKey(h), "%s and %s recorded the same hash for the same value", where, seen[h])
		seen[h] = where
	}
	NewWithT(t).Expect(hashes).To(HaveLen(4))
}

// TestRefusedWriteIsNotRetried: a workload whose annotations leave no room
// for the record is refused by the API server; watcher says so in a
// Warning Event and does not retry a write that can only fail, while the
// other users of the same ConfigMap still restart.
func TestRefusedWriteIsNotRetried(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	full := deployment(ns, "full", envFrom("cfg", ""))
	full.Annotations = map[string]string{"example.com/blob": strings.Repeat("x", 256*1024-60)}
	create(t, full)
	ok := track(t, deployment(ns, "ok", envFrom("cfg", "")))
	w := startWatcher(t, ns)
	waitAdopted(t, deployment(ns, "ok", corev1.PodSpec{}))
	NewWithT(t).Eventually(func() []string { return events(t, ns, "full", "WriteFailed") }, wait).
		Should(ContainElement(ContainSubstring("Cannot record the configuration hashes")))
	setConfigMap(t, cm, "a", "2")
	waitRollouts(t, ok, 1)
	time.Sleep(quiet)
	// Once at adoption, once for the change: never retried with backoff.
	NewWithT(t).Expect(len(w.logs.Lines("not retrying", ns+"/full"))).To(BeNumerically("<=", 2), "refused writes:\n%s", strings.Join(w.logs.Lines("not retrying"), "\n"))
}

// TestReloadOnDelete: with --reload-on-delete, deleting a ConfigMap restarts
// the workloads that can start without it (an optional envFrom), and only
// those: a workload that needs it is not restarted (its new pods could not
// start) and a Warning Event says so.
func TestReloadOnDelete(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	optSpec := envFrom("cfg", "")
	optSpec.Containers[0].EnvFrom[0].ConfigMapRef.Optional = ptr.To(true)
	opt := track(t, deployment(ns, "opt", optSpec))
	need := track(t, deployment(ns, "need", envFrom("cfg", "")))
	startWatcher(t, ns, func(o *options.Options) { o.ReloadOnDelete = true })
	waitAdopted(t, deployment(ns, "opt", corev1.PodSpec{}))
	waitAdopted(t, deployment(ns, "need", corev1.PodSpec{}))

	if err := k8s.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	waitRollouts(t, opt, 1)
	NewWithT(t).Eventually(func() []string { return events(t, ns, "need", "MissingKey") }, wait).
		Should(ContainElement(ContainSubstring("ConfigMap cfg is gone")))
	stayRollouts(t, need, 0)
	stayRollouts(t, opt, 1)

	// Created again: the workload that needed it restarts only if the
	// content differs from what it runs with.
	create(t, configMap(ns, "cfg", map[string]string{"a": "2"}))
	waitRollouts(t, need, 1)
}
