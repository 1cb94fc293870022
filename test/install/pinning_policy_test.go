package install

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/test/fixture"
)

// The names of pinning's contract with watcher (issue 31).
const (
	pinsAnnotation   = "watcher.dev/pins"
	snapshotLabel    = "watcher.dev/snapshot"
	snapshotOf       = "watcher.dev/snapshot-of"
	snapshotsRefused = "watcher may create only snapshots"
	changesRefused   = "watcher may change only the owners of its snapshots"
	ownersRefused    = "a snapshot's owners may be only"
)

// TestPinningPolicies installs the chart with pinning.enabled and checks
// its admission policies on the API server: the MutatingAdmissionPolicy
// rewrites, in a new pod carrying watcher.dev/pins, exactly the names
// listed there (pinningPods); the ValidatingAdmissionPolicy lets watcher's
// ServiceAccount create only snapshots and change only their owners
// (pinningSnapshots), as RBAC cannot. `kubectl auth can-i` shows the
// rights pinning adds.
func TestPinningPolicies(t *testing.T) {
	g := NewWithT(t)
	ns, apps := namespace(t, "pin-sys", nil), namespace(t, "pin-apps", nil)
	notes := mustHelm(t, "install", "pn", chart, "-n", ns, "--wait", "--timeout=60s", "--set", "pinning.enabled=true", "--set", "pinning.grace=2s")
	t.Cleanup(func() { _, _ = helm(t, "uninstall", "pn", "-n", ns, "--wait") })
	g.Expect(strings.Join(strings.Fields(notes), " ")).To(ContainSubstring("Pinned config revisions are on"))
	objs := decode(t, []byte(mustHelm(t, "get", "manifest", "pn", "-n", ns)))
	g.Expect(find(objs, "MutatingAdmissionPolicy", "pn-watcher-pins")).To(HaveLen(1), "the API server serves MutatingAdmissionPolicy: helm installs the policy")
	g.Expect(find(objs, "ValidatingAdmissionPolicy", "pn-watcher-snapshots")).To(HaveLen(1))

	const sa = "pn-watcher"
	for _, c := range [][]string{
		{"create", "configmaps", "-n", apps},
		{"patch", "configmaps", "-n", apps},
		{"create", "secrets", "-n", apps},
		{"patch", "secrets", "-n", apps},
		{"watch", "replicasets.apps", "--all-namespaces"},
		{"list", "controllerrevisions.apps", "--all-namespaces"},
		{"get", "mutatingadmissionpolicies.admissionregistration.k8s.io/pn-watcher-pins", "--all-namespaces"},
		{"get", "mutatingadmissionpolicybindings.admissionregistration.k8s.io/pn-watcher-pins", "--all-namespaces"},
	} {
		g.Expect(canI(t, ns, sa, c)).To(BeTrue(), "can %v", c)
	}
	for _, c := range [][]string{
		{"update", "configmaps", "-n", apps},
		{"delete", "configmaps", "-n", apps},
		{"update", "secrets", "-n", apps},
		{"delete", "secrets", "-n", apps},
		{"create", "pods", "-n", apps},
		{"patch", "replicasets.apps", "-n", apps},
		{"get", "mutatingadmissionpolicies.admissionregistration.k8s.io/other", "--all-namespaces"},
		{"list", "mutatingadmissionpolicies.admissionregistration.k8s.io", "--all-namespaces"},
		{"update", "mutatingadmissionpolicies.admissionregistration.k8s.io/pn-watcher-pins", "--all-namespaces"},
	} {
		g.Expect(canI(t, ns, sa, c)).To(BeFalse(), "cannot %v", c)
	}

	t.Run("pods", func(t *testing.T) { pinningPods(t, apps) })
	t.Run("many sources", func(t *testing.T) { pinningManySources(t, apps) })
	t.Run("snapshots", func(t *testing.T) { pinningSnapshots(t, ns, sa, apps) })
	t.Run("watcher", func(t *testing.T) { pinningRuns(t, ns, sa, objs) })
}

// pinningRuns starts watcher with the environment of the release's
// Deployment and a token of its ServiceAccount sa, and checks that a
// pinned restart goes through the chart's rights and policies unrefused:
// a Deployment reading a ConfigMap and a Secret, both edited, rolls once;
// its new pods read snapshots watcher made, which end up owned by the new
// ReplicaSet only.
func pinningRuns(t *testing.T, ns, sa string, objs []*unstructured.Unstructured) {
	g := NewWithT(t)
	apps := namespace(t, "pin-run", nil)
	d := deployment(t, objs)
	g.Expect(envOf(d)).To(HaveKeyWithValue("PINNING", "true"))
	a := newNamedApp(t, apps, "cfg", "web", map[string]string{pin.Annotation: "true"})
	sec := fixture.Secret(apps, "db", map[string]string{"password": "p1"})
	g.Expect(k8s.Create(ctx, sec)).To(Succeed())
	w := startWatcher(t, watcherBin, d, tokenKubeconfig(t, ns, sa), nil)
	a.waitAdopted(t)
	// The Deployment reads the Secret too, from its second revision on.
	patch := client.RawPatch(k8stypes.StrategicMergePatchType, []byte(`{"spec":{"template":{"spec":{"volumes":[{"name":"db","secret":{"secretName":"db"}}]}}}}`))
	g.Expect(k8s.Patch(ctx, a.dep, patch)).To(Succeed())
	a.waitRollouts(t, 1)
	g.Eventually(func() string {
		r, _ := a.record(t)
		return r
	}, wait).Should(ContainSubstring("Secret/db"))
	a.change(t, "2")
	setSecret := client.RawPatch(k8stypes.MergePatchType, []byte(`{"stringData":{"password":"p2"}}`))
	g.Expect(k8s.Patch(ctx, sec, setSecret)).To(Succeed())
	a.waitRollouts(t, 2)
	a.stayRollouts(t, 2, 2*time.Second)
	pins := pin.Parse(get(t, a.dep).Spec.Template.Annotations[pin.PinsAnnotation])
	g.Expect(pins).To(HaveLen(2))
	g.Eventually(func() []string {
		var list corev1.PodList
		g.Expect(k8s.List(ctx, &list, client.InNamespace(apps))).To(Succeed())
		var reads []string
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil && p.Annotations[pin.PinsAnnotation] != "" {
				reads = append(reads, p.Spec.Containers[0].EnvFrom[0].ConfigMapRef.Name+","+p.Spec.Volumes[0].Secret.SecretName)
			}
		}
		return reads
	}, wait).Should(ConsistOf(pins[pin.Source{Kind: pin.ConfigMap, Name: "cfg"}] + "," + pins[pin.Source{Kind: pin.Secret, Name: "db"}]))
	g.Eventually(func() []string {
		var kinds []string
		for _, o := range []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}} {
			name := pins[pin.Source{Kind: pin.ConfigMap, Name: "cfg"}]
			if _, ok := o.(*corev1.Secret); ok {
				name = pins[pin.Source{Kind: pin.Secret, Name: "db"}]
			}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: apps, Name: name}, o)).To(Succeed())
			for _, r := range o.GetOwnerReferences() {
				kinds = append(kinds, r.Kind)
			}
		}
		return kinds
	}, wait).Should(Equal([]string{"ReplicaSet", "ReplicaSet"}), "handed to the new ReplicaSet")
	noForbidden(t, w)
}

// Snapshot names: a source's name, -pin- and 20 hex digits.
const (
	appPin  = "app-pin-0123456789abcdef0123"
	dbPin   = "db-pin-89abcdef0123456789ab"
	xPin    = "x-pin-00000000000000000002"
	longPin = "long-pin-00000000000000000003"
)

// pinningPods creates pods (dry runs, as the admin) and compares every
// ConfigMap and Secret reference of each, by place, with what the policy
// must make of it.
func pinningPods(t *testing.T, apps string) {
	pins := strings.Join([]string{
		"configmap/app=" + appPin,
		"secret/db=" + dbPin,
		"configmap/x=x-pin-00000000000000000001", "configmap/x=" + xPin, // twice: the last wins
		"configmap/long-name=" + longPin,
		"Secret/bad=bad-pin-00000000000000000004", // malformed entries: ignored
		"secret/bad",
		"configmap/other=Other_Pin",
		"secret/a=b=c",
		"",
	}, ",")
	for _, tc := range []struct {
		name, pins string
		want       map[string]string // source (kind/name) -> name after admission
	}{
		{"pinned", pins, map[string]string{"configmap/app": appPin, "secret/db": dbPin, "configmap/x": xPin, "configmap/long-name": longPin}},
		{"no annotation", "", nil},
		{"nothing well-formed", "garbage,configmap/app,=,configmap/app=APP", nil},
		{"pinned, sources not used", "configmap/unused=unused-pin-00000000000000000005", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := pinnedPod(apps, tc.pins)
			want := map[string]string{}
			for place, source := range references(&pod.Spec) {
				name := source[strings.Index(source, "/")+1:]
				if snap, ok := tc.want[source]; ok {
					name = snap
				}
				want[place] = name
			}
			got := func() map[string]string {
				p := pod.DeepCopy()
				if err := k8s.Create(ctx, p, client.DryRunAll); err != nil {
					t.Fatalf("create pod: %v", err)
				}
				out := map[string]string{}
				for place, source := range references(&p.Spec) {
					out[place] = source[strings.Index(source, "/")+1:]
				}
				return out
			}
			// The policy may take a moment to be in force after the
			// install: wait for the first pod, then check the others at
			// once.
			NewWithT(t).Eventually(got, wait, 200*time.Millisecond).Should(Equal(want))
		})
	}
}

// pinningManySources: a pod pinning 200 sources with long names (more
// than any workload reads) is within the policy's CEL cost budget, and
// each is rewritten.
func pinningManySources(t *testing.T, apps string) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "many"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}
	var pins []string
	for i := range 200 {
		source := fmt.Sprintf("source-%03d-%s", i, strings.Repeat("n", 50))
		pins = append(pins, "configmap/"+source+"="+source+"-pin-0123456789abcdef0123")
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: fmt.Sprintf("v%d", i),
			VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: source}}}})
	}
	pod.Annotations = map[string]string{pinsAnnotation: strings.Join(pins, ",")}
	if err := k8s.Create(ctx, pod, client.DryRunAll); err != nil {
		t.Fatalf("create a pod of 200 pinned sources: %v", err)
	}
	for _, v := range pod.Spec.Volumes {
		if !strings.HasSuffix(v.ConfigMap.Name, "-pin-0123456789abcdef0123") {
			t.Errorf("volume %s reads %s, not its snapshot", v.Name, v.ConfigMap.Name)
		}
	}
}

// pinnedPod is a pod that reads ConfigMaps and Secrets in every place the
// policy rewrites, and some it does not (a source not listed, a
// downward API projection), with pins as its watcher.dev/pins ("": none).
func pinnedPod(ns, pins string) *corev1.Pod {
	cmKey := func(name string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "k"}}
	}
	secretKey := func(name string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "k"}}
	}
	cmFrom := func(name string) corev1.EnvFromSource {
		return corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}
	}
	secretFrom := func(name string) corev1.EnvFromSource {
		return corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pinned", Labels: map[string]string{"watcher.dev/pinned": "true"}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox",
				EnvFrom: []corev1.EnvFromSource{secretFrom("db"), cmFrom("other")},
				Env:     []corev1.EnvVar{{Name: "A", ValueFrom: cmKey("app")}, {Name: "B", Value: "plain"}}}},
			Containers: []corev1.Container{
				{Name: "main", Image: "busybox",
					EnvFrom: []corev1.EnvFromSource{cmFrom("app"), secretFrom("other"), cmFrom("long-name")},
					Env: []corev1.EnvVar{{Name: "A", ValueFrom: cmKey("x")}, {Name: "B", ValueFrom: secretKey("db")},
						{Name: "C", Value: "plain"}, {Name: "D", ValueFrom: secretKey("bad")}, {Name: "E", ValueFrom: cmKey("other")}}},
				{Name: "side", Image: "busybox", EnvFrom: []corev1.EnvFromSource{secretFrom("db")},
					Env: []corev1.EnvVar{{Name: "A", ValueFrom: secretKey("a")}}},
			},
			Volumes: []corev1.Volume{
				{Name: "app", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}},
				{Name: "db", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db"}}},
				{Name: "bad", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "bad"}}},
				{Name: "other", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "other"}}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "all", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "x"}}},
					{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "other"}}},
					{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "long-name"}}}, // a Secret, not the ConfigMap pinned
				}}}},
			},
		},
	}
	if pins != "" {
		pod.Annotations = map[string]string{pinsAnnotation: pins}
	}
	return pod
}

// references lists the ConfigMap and Secret references of spec by place
// (volumes[1].secret, containers[0].env[1], ...), each as kind/name.
func references(spec *corev1.PodSpec) map[string]string {
	out := map[string]string{}
	for i, v := range spec.Volumes {
		at := fmt.Sprintf("volumes[%d]", i)
		switch {
		case v.ConfigMap != nil:
			out[at+".configMap"] = "configmap/" + v.ConfigMap.Name
		case v.Secret != nil:
			out[at+".secret"] = "secret/" + v.Secret.SecretName
		case v.Projected != nil:
			for j, s := range v.Projected.Sources {
				switch {
				case s.ConfigMap != nil:
					out[fmt.Sprintf("%s.sources[%d].configMap", at, j)] = "configmap/" + s.ConfigMap.Name
				case s.Secret != nil:
					out[fmt.Sprintf("%s.sources[%d].secret", at, j)] = "secret/" + s.Secret.Name
				}
			}
		}
	}
	containers := func(kind string, cs []corev1.Container) {
		for i, c := range cs {
			at := fmt.Sprintf("%s[%d]", kind, i)
			for j, e := range c.EnvFrom {
				switch {
				case e.ConfigMapRef != nil:
					out[fmt.Sprintf("%s.envFrom[%d]", at, j)] = "configmap/" + e.ConfigMapRef.Name
				case e.SecretRef != nil:
					out[fmt.Sprintf("%s.envFrom[%d]", at, j)] = "secret/" + e.SecretRef.Name
				}
			}
			for j, e := range c.Env {
				switch {
				case e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil:
					out[fmt.Sprintf("%s.env[%d]", at, j)] = "configmap/" + e.ValueFrom.ConfigMapKeyRef.Name
				case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
					out[fmt.Sprintf("%s.env[%d]", at, j)] = "secret/" + e.ValueFrom.SecretKeyRef.Name
				}
			}
		}
	}
	containers("initContainers", spec.InitContainers)
	containers("containers", spec.Containers)
	return out
}

// owner is an owner reference of kind (apps/v1 unless the kind is
// Rollout), neither controlling nor blocking.
func owner(kind string) metav1.OwnerReference {
	apiVersion := "apps/v1"
	if kind == "Rollout" {
		apiVersion = "argoproj.io/v1alpha1"
	}
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: "app", UID: "8d5c2f1e-0000-4000-8000-0000000000aa"}
}

// snapshotMeta is the metadata of the snapshot name of kind/source, as
// watcher makes it.
func snapshotMeta(ns, name, kind, source string, owners ...metav1.OwnerReference) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{snapshotLabel: "true"},
		Annotations: map[string]string{snapshotOf: kind + "/" + source}, OwnerReferences: owners}
}

// snapshotConfigMap and snapshotSecret are snapshots of the ConfigMap app
// and of the Secret db, edited by edit (nil: none).
func snapshotConfigMap(ns string, edit func(*corev1.ConfigMap)) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: snapshotMeta(ns, appPin, "configmap", "app", owner("Deployment")),
		Immutable: ptr.To(true), Data: map[string]string{"k": "v"}}
	if edit != nil {
		edit(cm)
	}
	return cm
}

func snapshotSecret(ns string, edit func(*corev1.Secret)) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: snapshotMeta(ns, dbPin, "secret", "db", owner("Deployment")),
		Immutable: ptr.To(true), Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"k": []byte("v")}}
	if edit != nil {
		edit(s)
	}
	return s
}

// deniedBy waits until the API server answers a request (do) with the
// refusal of an admission policy that matches want.
func deniedBy(t *testing.T, do func() error, want types.GomegaMatcher, what string) {
	t.Helper()
	NewWithT(t).Eventually(do, wait, 200*time.Millisecond).Should(MatchError(And(ContainSubstring("ValidatingAdmissionPolicy"), want)), what)
}

// withLabels returns m with labels added.
func withLabels(m map[string]string, add map[string]string) map[string]string {
	out := maps.Clone(m)
	maps.Copy(out, add)
	return out
}
