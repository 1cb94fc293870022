package integration

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/restart"
)

// envStrategy runs a watcher with the env restart strategy.
func envStrategy(o *options.Options) { o.RestartStrategy = "env" }

// manyContainers reads every key of ConfigMap cm in a pod of two
// containers, an init container and a native sidecar, with env vars of
// their own.
func manyContainers(cm string) corev1.PodSpec {
	env := func(kv ...string) []corev1.EnvVar {
		var out []corev1.EnvVar
		for i := 0; i < len(kv); i += 2 {
			out = append(out, corev1.EnvVar{Name: kv[i], Value: kv[i+1]})
		}
		return out
	}
	const image = "registry.example/app:1"
	return corev1.PodSpec{
		InitContainers: []corev1.Container{
			{Name: "init", Image: image, Env: env("I", "1")},
			{Name: "sidecar", Image: image, RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)},
		},
		Containers: []corev1.Container{
			{Name: "app", Image: image, Env: env("Z", "z", "A", "a"), EnvFrom: envFrom(cm, "").Containers[0].EnvFrom},
			{Name: "side", Image: image, Env: env("S", "s")},
		},
	}
}

// expectEnvRestart checks that got is want with the variable of the env
// strategy set to the restart ID of got's record, ahead of the own env of
// each of its containers, and that it is not restarted by annotation. It
// returns the value.
func expectEnvRestart(g Gomega, want, got *appsv1.Deployment) string {
	rec, err := plan.ParseRecord(got.Annotations[plan.RecordAnnotation])
	g.Expect(err).NotTo(HaveOccurred())
	id := rec.RestartID()
	spec := want.Spec.Template.Spec.DeepCopy()
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			cs[i].Env = append([]corev1.EnvVar{{Name: restart.EnvName, Value: id}}, cs[i].Env...)
		}
	}
	// Compare what the test wrote: the API server defaults the rest.
	names := func(cs []corev1.Container) (out []string) {
		for _, c := range cs {
			out = append(out, c.Name)
		}
		return out
	}
	envs := func(cs []corev1.Container) (out [][]corev1.EnvVar) {
		for _, c := range cs {
			out = append(out, c.Env)
		}
		return out
	}
	gs := got.Spec.Template.Spec
	g.Expect(names(gs.Containers)).To(Equal(names(spec.Containers)), "containers")
	g.Expect(names(gs.InitContainers)).To(Equal(names(spec.InitContainers)), "init containers")
	g.Expect(envs(gs.Containers)).To(Equal(envs(spec.Containers)), "env of the containers")
	g.Expect(envs(gs.InitContainers)).To(Equal(envs(spec.InitContainers)), "env of the init containers")
	g.Expect(gs.Containers[0].EnvFrom).To(Equal(spec.Containers[0].EnvFrom), "envFrom")
	g.Expect(got.Spec.Template.Annotations).NotTo(HaveKey(plan.RestartAnnotation))
	return id
}

// TestStrategyEnv: with the env strategy, a change rolls the workload once
// and sets the variable on every container, init containers included,
// leaving the containers, their order and their own env vars as they were;
// a second change changes its value; the same configuration again, or a
// restart of watcher, rolls nothing.
func TestStrategyEnv(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	d := deployment(ns, "web", manyContainers("cfg"))
	want := d.DeepCopy()
	tr := track(t, d)
	w := startWatcher(t, ns, envStrategy)
	waitAdopted(t, d)
	stayRollouts(t, tr, 0)

	setConfigMap(t, cm, "a", "2")
	waitRollouts(t, tr, 1)
	stayRollouts(t, tr, 1)
	first := expectEnvRestart(g, want, fetch(t, d))
	waitRestarted(t, ns, "web")
	// The strategy used is said in the log line only.
	waitLog(t, w, `"msg"="Restarted"`, `"workload"="Deployment `+ns+`/web"`, `"strategy"="env"`)

	setConfigMap(t, cm, "a", "3")
	waitRollouts(t, tr, 2)
	stayRollouts(t, tr, 2)
	second := expectEnvRestart(g, want, fetch(t, d))
	g.Expect(second).NotTo(Equal(first), "the second restart set the same value")

	// The same data written again (with a new label, so that the write
	// happens), then a restart of watcher: nothing rolls.
	edit(t, cm, func(cm *corev1.ConfigMap) {
		cm.Labels = map[string]string{"written": "again"}
		cm.Data = map[string]string{"a": "3"}
	})
	stayRollouts(t, tr, 2)
	w.Stop()
	startWatcher(t, ns, envStrategy)
	stayRollouts(t, tr, 2)
	g.Expect(expectEnvRestart(g, want, fetch(t, d))).To(Equal(second))
}

// TestStrategyAnnotationOverride: the annotation on a workload chooses its
// strategy over --restart-strategy; changing it switches the strategy of
// that workload alone, and a value that names no strategy is reported and
// the default used.
func TestStrategyAnnotationOverride(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	byFlag := deployment(ns, "by-flag", manyContainers("cfg"))
	byAnnotation := deployment(ns, "by-annotation", manyContainers("cfg"))
	byAnnotation.Annotations = map[string]string{restart.StrategyAnnotation: "env"}
	invalid := deployment(ns, "invalid", manyContainers("cfg"))
	invalid.Annotations = map[string]string{restart.StrategyAnnotation: "restartAt"}
	want := byFlag.DeepCopy()
	trFlag, trAnnotation, trInvalid := track(t, byFlag), track(t, byAnnotation), track(t, invalid)
	startWatcher(t, ns) // the default: annotation
	for _, d := range []*appsv1.Deployment{byFlag, byAnnotation, invalid} {
		waitAdopted(t, d)
	}

	setConfigMap(t, cm, "a", "2")
	waitRollouts(t, trFlag, 1)
	waitRollouts(t, trAnnotation, 1)
	waitRollouts(t, trInvalid, 1)
	restartedByAnnotation := func(d *appsv1.Deployment) {
		t.Helper()
		got := fetch(t, d)
		g.Expect(got.Spec.Template.Annotations).To(HaveKey(plan.RestartAnnotation), "%s", d.Name)
		for _, c := range append(got.Spec.Template.Spec.InitContainers, got.Spec.Template.Spec.Containers...) {
			for _, e := range c.Env {
				g.Expect(e.Name).NotTo(Equal(restart.EnvName), "%s container %s", d.Name, c.Name)
			}
		}
	}
	restartedByAnnotation(byFlag)
	restartedByAnnotation(invalid)
	expectEnvRestart(g, want, fetch(t, byAnnotation))
	g.Eventually(func() []string { return events(t, ns, "invalid", "InvalidAnnotation") }, wait).
		Should(ContainElement(ContainSubstring(restart.StrategyAnnotation)))

	// Switching the strategy of one workload rolls nothing by itself; its
	// next restart uses the new one, the others keep theirs.
	edit(t, byFlag, func(d *appsv1.Deployment) {
		d.Annotations[restart.StrategyAnnotation] = "env"
	})
	stayRollouts(t, trFlag, 1)
	setConfigMap(t, cm, "a", "3")
	waitRollouts(t, trFlag, 2)
	waitRollouts(t, trAnnotation, 2)
	waitRollouts(t, trInvalid, 2)
	got := fetch(t, byFlag)
	rec, err := plan.ParseRecord(got.Annotations[plan.RecordAnnotation])
	g.Expect(err).NotTo(HaveOccurred())
	for _, c := range append(got.Spec.Template.Spec.InitContainers, got.Spec.Template.Spec.Containers...) {
		g.Expect(c.Env).To(ContainElement(corev1.EnvVar{Name: restart.EnvName, Value: rec.RestartID()}), "container %s", c.Name)
	}
	restartedByAnnotation(invalid)
	expectEnvRestart(g, want, fetch(t, byAnnotation))
}

// TestStrategyEnvGitOps: a kubectl re-apply of the user's unchanged
// manifest (client-side and server-side) keeps the variable the env
// strategy set, writes nothing and rolls nothing: the manifest does not
// name the variable, and the merge of each keeps list entries it does not
// manage.
func TestStrategyEnvGitOps(t *testing.T) {
	t.Parallel()
	kc := newKubectl(t)
	for _, mode := range []applyMode{clientSideApply, serverSideApply} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			ns := namespace(t)
			cm := configMap(ns, "cfg", map[string]string{"a": "1"})
			create(t, cm)
			file := filepath.Join(t.TempDir(), "web.yaml")
			if err := os.WriteFile(file, []byte(deploymentManifest(nil)), 0o600); err != nil {
				t.Fatal(err)
			}
			apply := func() { kc.run(t, append(append([]string{"-n", ns}, mode.args...), "-f", file)...) }
			dep := &appsv1.Deployment{ObjectMeta: meta(ns, "web")}
			revs := watchRevisions(t, ns, "web")
			apply()
			revs.waitSeen(t)
			startWatcher(t, ns, envStrategy)
			waitAdopted(t, dep)

			setConfigMap(t, cm, "a", "2")
			revs.wait(t, 1)
			revs.stay(t, 1)
			before := fetch(t, dep).DeepCopy()
			g.Expect(before.Spec.Template.Spec.Containers[0].Env).To(HaveLen(1))
			apply()
			revs.stay(t, 1)
			after := fetch(t, dep)
			g.Expect(after.ResourceVersion).To(Equal(before.ResourceVersion), "the re-apply of the unchanged manifest wrote to the Deployment")
			g.Expect(after.Spec.Template).To(Equal(before.Spec.Template))

			setConfigMap(t, cm, "a", "3")
			revs.wait(t, 2)
			revs.stay(t, 2)
		})
	}
}
