package main

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watcher-dev/watcher/internal/pin"
)

// TestPinnedObjects: each Deployment reads a ConfigMap and a Secret of its
// own, through envFrom and a volume; only the pinned set is annotated;
// configs come before the Deployments that read them.
func TestPinnedObjects(t *testing.T) {
	g := NewWithT(t)
	objs := pinnedObjects(3, 64)
	g.Expect(objs).To(HaveLen(2*3*3), "two sets of three Deployments, a ConfigMap and a Secret each")
	names := map[string]bool{}
	var deployments []*appsv1.Deployment
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.ConfigMap:
			g.Expect(deployments).To(BeEmpty(), "configs first")
			g.Expect(o.Data[dataKey]).To(HaveLen(64))
			names["configmap/"+o.Name] = true
		case *corev1.Secret:
			g.Expect(deployments).To(BeEmpty(), "configs first")
			g.Expect(o.Data[dataKey]).To(HaveLen(64))
			names["secret/"+o.Name] = true
		case *appsv1.Deployment:
			deployments = append(deployments, o)
		}
	}
	g.Expect(names).To(HaveLen(12), "no config shared")
	g.Expect(deployments).To(HaveLen(6))
	pinned := 0
	for _, d := range deployments {
		c := d.Spec.Template.Spec.Containers[0]
		g.Expect(c.EnvFrom).To(HaveLen(1))
		g.Expect(names).To(HaveKey("configmap/" + c.EnvFrom[0].ConfigMapRef.Name))
		g.Expect(d.Spec.Template.Spec.Volumes).To(HaveLen(1))
		g.Expect(names).To(HaveKey("secret/" + d.Spec.Template.Spec.Volumes[0].Secret.SecretName))
		if d.Annotations[pin.Annotation] == "true" {
			pinned++
			g.Expect(d.Name).To(HavePrefix("pin-"))
			g.Expect(c.EnvFrom[0].ConfigMapRef.Name).To(HavePrefix("pin-"))
		} else {
			g.Expect(d.Name).NotTo(HavePrefix("pin-"))
		}
	}
	g.Expect(pinned).To(Equal(3))
}

func TestCountSnapshots(t *testing.T) {
	g := NewWithT(t)
	rs := []metav1.OwnerReference{{Kind: "Deployment"}, {Kind: "ReplicaSet"}, {Kind: "ReplicaSet"}}
	cms := []corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{OwnerReferences: rs}, Data: map[string]string{"a": "12345"}, BinaryData: map[string][]byte{"b": {1, 2}}},
		{ObjectMeta: metav1.ObjectMeta{OwnerReferences: rs[:1]}, Data: map[string]string{"k": "v"}},
	}
	secs := []corev1.Secret{{ObjectMeta: metav1.ObjectMeta{OwnerReferences: rs[1:2]}, Data: map[string][]byte{"pw": []byte("secret")}}}
	got := countSnapshots(cms, secs)
	g.Expect(got).To(Equal(snapshotStats{Objects: 3, ConfigMaps: 2, Secrets: 1, DataBytes: 6 + 3 + 2 + 8, OwnedByReplicaSets: 2}))
	g.Expect(got.minus(got)).To(Equal(snapshotStats{}))
	g.Expect(got.plus(got).minus(got)).To(Equal(got))

	r := &pinnedResult{}
	g.Expect(r.lastSnapshots()).To(Equal(snapshotStats{}))
	r.Phases = []pinnedPhase{{Snapshots: got}, {Snapshots: got}}
	g.Expect(r.lastSnapshots()).To(Equal(got.plus(got)))
}

func TestMutatingPolicies(t *testing.T) {
	const policy = "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingAdmissionPolicy\nmetadata:\n  name: watcher-pins\n"
	const binding = "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingAdmissionPolicyBinding\nmetadata:\n  name: watcher-pins\n"
	const other = "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata:\n  name: watcher-snapshots\n"
	tests := []struct {
		name      string
		manifests string
		want      []string // kinds; nil: an error
	}{
		{"policy and binding, others left out", "---\n" + policy + "---\n" + other + "---\n" + binding,
			[]string{"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"}},
		{"pinning off: nothing rendered", "", nil},
		{"no binding", policy + "---\n" + other, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			objs, err := mutatingPolicies([]byte(tt.manifests))
			if tt.want == nil {
				g.Expect(err).To(MatchError(ContainSubstring("want 1 each")))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			var kinds []string
			for _, o := range objs {
				kinds = append(kinds, o.GetKind())
			}
			g.Expect(kinds).To(Equal(tt.want))
		})
	}
}

func TestWritePinned(t *testing.T) {
	g := NewWithT(t)
	r := &pinnedResult{Workloads: 200, Changes: 100, Rate: 2, Size: 16384, ControllerCmd: "bin/watcher --pinning", Phases: []pinnedPhase{
		{Name: pinPhaseUnpinned, Latency: latency{P50ms: 10, P99ms: 20, MaxMs: 30},
			Correctness: correctness{Expected: 100, Seen: 100},
			Requests:    map[string]int{"patch deployments": 100, "create events": 100}},
		{Name: pinPhasePinned, Latency: latency{P50ms: 40, P99ms: 80, MaxMs: 90},
			Correctness: correctness{Expected: 100, Seen: 100},
			Snapshots:   snapshotStats{Objects: 200, ConfigMaps: 100, Secrets: 100, DataBytes: 200 * 16390, OwnedByReplicaSets: 200},
			Requests:    map[string]int{"patch deployments": 100, "create events": 100, "create configmaps": 100}},
	}}
	g.Expect(r.ok()).To(BeTrue())
	var b strings.Builder
	g.Expect(writePinned(&b, r)).To(Succeed())
	out := b.String()
	for _, want := range []string{
		"200 unpinned and 200 pinned Deployments",
		"100/100 (0, 0)",
		"10.0 / 20.0 / 30.0",
		"40.0 / 80.0 / 90.0",
		"200 (100 + 100)",
		"3201.2 (32.0)",
		"create configmaps                           0 (0.00)                100 (1.00)",
		"controller requests, all (per restart)        200 (2.00)              300 (3.00)",
	} {
		g.Expect(out).To(ContainSubstring(want))
	}
	r.Phases[1].Snapshots.OwnedByReplicaSets--
	g.Expect(r.ok()).To(BeFalse(), "a snapshot not handed over")
	r.Phases[1].Snapshots.OwnedByReplicaSets++
	r.Phases[1].Correctness.Missed = 1
	g.Expect(r.ok()).To(BeFalse(), "a restart missed")
	r.Phases[1].Correctness.Missed = 0
	r.Phases[1].Snapshots = snapshotStats{}
	g.Expect(r.ok()).To(BeFalse(), "pinning off: no snapshot")
}

func TestValidatePinned(t *testing.T) {
	tests := []struct {
		name   string
		change func(*options)
		ok     bool
	}{
		{"defaults", func(*options) {}, true},
		{"more changes than workloads", func(o *options) { o.Changes = 201 }, false},
		{"with --shared", func(o *options) { o.Shared = 10 }, false},
		{"with --policies", func(o *options) { o.Policies = 10 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			o := options{Scenario: defaultScenario(), Watcher: "bin/watcher", Pinned: true, Replicas: 1}
			o.Workloads, o.Configs = 200, 200
			tt.change(&o)
			if tt.ok {
				g.Expect(o.validate()).To(Succeed())
			} else {
				g.Expect(o.validate()).To(MatchError(ContainSubstring("--pinned")))
			}
		})
	}
}
