package main

import (
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

func defaultScenario() Scenario {
	return Scenario{Workloads: 1000, Configs: 1000, Kind: kindSecret, Size: 16384, RefsPerWorkload: 1, Changes: 200, Rate: 20}
}

// TestRefsAndUsers checks that Users is the inverse of Refs.
func TestRefsAndUsers(t *testing.T) {
	for _, s := range []Scenario{
		{Workloads: 10, Configs: 10, RefsPerWorkload: 1},
		{Workloads: 10, Configs: 4, RefsPerWorkload: 3},
		{Workloads: 5, Configs: 12, RefsPerWorkload: 2},
	} {
		g := NewWithT(t)
		users := map[int][]int{}
		for i := range s.Workloads {
			refs := s.Refs(i)
			g.Expect(refs).To(HaveLen(s.RefsPerWorkload))
			for _, j := range refs {
				users[j] = append(users[j], i)
			}
		}
		for j := range s.Configs {
			g.Expect(s.Users(j)).To(Equal(users[j]), "config %d of %+v", j, s)
		}
	}
}

func TestChangedConfigsAreSpread(t *testing.T) {
	g := NewWithT(t)
	s := defaultScenario()
	s.RefsPerWorkload = 3
	restarted := map[int]bool{}
	for k := range s.Changes {
		for _, w := range s.Users(s.ChangedConfig(k)) {
			g.Expect(restarted).NotTo(HaveKey(w), "change %d restarts workload %d again", k, w)
			restarted[w] = true
		}
	}
	g.Expect(restarted).To(HaveLen(s.Changes * s.RefsPerWorkload))
	g.Expect(s.Validate()).To(Succeed())
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Scenario)
		want   string // empty: valid
	}{
		{"defaults", func(*Scenario) {}, ""},
		{"mixed 1 KiB", func(s *Scenario) { s.Kind, s.Size = kindMixed, 1024 }, ""},
		{"configs reused slowly", func(s *Scenario) { s.Configs, s.Workloads, s.Rate = 10, 10, 5 }, ""},
		{"configs reused too fast", func(s *Scenario) { s.Configs, s.Workloads = 10, 10 }, "changed twice within 500ms"},
		{"unknown kind", func(s *Scenario) { s.Kind = "pod" }, `--kind "pod"`},
		{"too many refs", func(s *Scenario) { s.RefsPerWorkload = 1001 }, "--refs-per-workload"},
		{"no rate", func(s *Scenario) { s.Rate = 0 }, "--rate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := defaultScenario()
			tt.change(&s)
			if tt.want == "" {
				g.Expect(s.Validate()).To(Succeed())
			} else {
				g.Expect(s.Validate()).To(MatchError(ContainSubstring(tt.want)))
			}
		})
	}
}

func TestAtInterleaves(t *testing.T) {
	g := NewWithT(t)
	s := defaultScenario()
	g.Expect(s.At(0, false)).To(Equal(time.Duration(0)))
	g.Expect(s.At(0, true)).To(Equal(25 * time.Millisecond))
	g.Expect(s.At(1, false)).To(Equal(50 * time.Millisecond))
	g.Expect(s.FloorPairs()).To(Equal(200))
}

func TestObjects(t *testing.T) {
	g := NewWithT(t)
	s := defaultScenario()
	s.Kind, s.RefsPerWorkload = kindMixed, 3
	g.Expect(payload(100, 7)).To(HaveLen(100))
	g.Expect(payload(100, 7)).NotTo(Equal(payload(100, 8)))

	g.Expect(s.object(0)).To(BeAssignableToTypeOf(&corev1.Secret{}))
	g.Expect(s.object(1)).To(BeAssignableToTypeOf(&corev1.ConfigMap{}))
	g.Expect(s.object(s.Configs).(*corev1.Secret).Name).To(Equal("floor-cfg-00000"))
	d := s.object(s.Configs + s.FloorPairs() + 4).(*appsv1.Deployment)
	g.Expect(d.Name).To(Equal("app-00004"))
	g.Expect(*d.Spec.Replicas).To(BeZero())
	c := d.Spec.Template.Spec.Containers[0]
	// Refs 4, 5, 6 through a volume, a keyRef and envFrom ((4+k) mod 3).
	g.Expect(d.Spec.Template.Spec.Volumes).To(HaveLen(1))
	g.Expect(d.Spec.Template.Spec.Volumes[0].Secret.SecretName).To(Equal("cfg-00004"))
	g.Expect(c.Env).To(HaveLen(1))
	g.Expect(c.Env[0].ValueFrom.ConfigMapKeyRef.Name).To(Equal("cfg-00005"))
	g.Expect(c.Env[0].ValueFrom.ConfigMapKeyRef.Key).To(Equal(dataKey))
	g.Expect(c.EnvFrom).To(HaveLen(1))
	g.Expect(c.EnvFrom[0].SecretRef.Name).To(Equal("cfg-00006"))
	floor := s.object(s.Configs + s.FloorPairs() + s.Workloads).(*appsv1.Deployment)
	g.Expect(floor.Name).To(Equal("floor-00000"))
	g.Expect(floor.Spec.Template.Spec.Containers[0].EnvFrom).To(BeEmpty())

	patch, err := configPatch(true, 32, 3)
	g.Expect(err).NotTo(HaveOccurred())
	var secret corev1.Secret
	g.Expect(json.Unmarshal(patch, &secret)).To(Succeed())
	g.Expect(secret.Data[dataKey]).To(Equal(payload(32, 3)))
	var tmpl appsv1.Deployment
	g.Expect(json.Unmarshal(floorPatch(9), &tmpl)).To(Succeed())
	g.Expect(tmpl.Spec.Template.Annotations).To(HaveKeyWithValue(floorAnnotation, "9"))
}
