package refs_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/watcher-dev/watcher/internal/refs"
)

// TestPaths: one Path per place, with its way (env, envFrom, volume,
// projected), its field, its keys and its own optional; the objects are
// those of FromPodSpec.
func TestPaths(t *testing.T) {
	optional := fromSecret("tls")
	optional.SecretRef.Optional = ptr.To(true)
	init := envFrom(fromCM("cfg"))
	init.Name = "init"
	main := env(envCM("cfg", "LOG_LEVEL"), envSecret("db", "password"))
	main.Name = "app"
	main.EnvFrom = []corev1.EnvFromSource{fromCM("unused-later"), optional}
	vol := volCM("cfg", "a.yaml")
	vol.Name = "config"
	proj := projected(projSecret("db"), projCM("ca", "ca.crt"))
	proj.Name = "bundle"
	spec := &corev1.PodSpec{InitContainers: []corev1.Container{init}, Containers: []corev1.Container{main}, Volumes: []corev1.Volume{vol, proj}}

	want := []refs.Path{
		{Kind: refs.ConfigMap, Name: "ca", Via: refs.ViaProjected, Where: "volumes[bundle].projected.sources[1]", Keys: []string{"ca.crt"}},
		{Kind: refs.ConfigMap, Name: "cfg", Via: refs.ViaEnvFrom, Where: "initContainers[init].envFrom[0]"},
		{Kind: refs.ConfigMap, Name: "cfg", Via: refs.ViaEnv, Where: "containers[app].env[E]", Keys: []string{"LOG_LEVEL"}},
		{Kind: refs.ConfigMap, Name: "cfg", Via: refs.ViaVolume, Where: "volumes[config]", Keys: []string{"a.yaml"}},
		{Kind: refs.ConfigMap, Name: "unused-later", Via: refs.ViaEnvFrom, Where: "containers[app].envFrom[0]"},
		{Kind: refs.Secret, Name: "db", Via: refs.ViaEnv, Where: "containers[app].env[E]", Keys: []string{"password"}},
		{Kind: refs.Secret, Name: "db", Via: refs.ViaProjected, Where: "volumes[bundle].projected.sources[0]"},
		{Kind: refs.Secret, Name: "tls", Via: refs.ViaEnvFrom, Where: "containers[app].envFrom[1]", Optional: true},
	}
	got := refs.Paths(spec)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Paths (-want +got):\n%s", diff)
	}
	var fromPaths, fromRefs []string
	for _, p := range got {
		if n := len(fromPaths); n == 0 || fromPaths[n-1] != p.ID() {
			fromPaths = append(fromPaths, p.ID())
		}
	}
	for _, r := range refs.FromPodSpec(spec) {
		fromRefs = append(fromRefs, r.ID())
	}
	if diff := cmp.Diff(fromRefs, fromPaths); diff != "" {
		t.Errorf("objects of Paths differ from FromPodSpec's (-FromPodSpec +Paths):\n%s", diff)
	}
	if got := refs.Paths(&corev1.PodSpec{}); got != nil {
		t.Errorf("Paths of an empty spec = %v, want nil", got)
	}
}
