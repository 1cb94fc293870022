package install

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
)

// TestGoMemLimit: with a memory limit (the default values have one), the
// container's GOMEMLIMIT is that limit, through the downward API; without
// one, none is set; an extraEnv GOMEMLIMIT comes later and wins.
func TestGoMemLimit(t *testing.T) {
	g := NewWithT(t)
	memLimits := func(args ...string) []corev1.EnvVar {
		var out []corev1.EnvVar
		for _, e := range deployment(t, render(t, "watcher", "watcher", args...)).Spec.Template.Spec.Containers[0].Env {
			if e.Name == "GOMEMLIMIT" {
				out = append(out, e)
			}
		}
		return out
	}
	def := memLimits()
	g.Expect(def).To(HaveLen(1))
	g.Expect(def[0].ValueFrom).NotTo(BeNil())
	g.Expect(def[0].ValueFrom.ResourceFieldRef).NotTo(BeNil())
	g.Expect(def[0].ValueFrom.ResourceFieldRef.Resource).To(Equal("limits.memory"))

	g.Expect(memLimits("--set", "resources.limits=null")).To(BeEmpty())

	own := memLimits("--set", "extraEnv[0].name=GOMEMLIMIT", "--set", "extraEnv[0].value=200MiB")
	g.Expect(own).To(HaveLen(2))
	g.Expect(own[1].Value).To(Equal("200MiB"), "the user's, last, wins")
}
