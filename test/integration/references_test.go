package integration

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestEveryReferencePathRestarts changes a ConfigMap or Secret used through
// each kind of reference and expects exactly one rollout.
func TestEveryReferencePathRestarts(t *testing.T) {
	t.Parallel()
	cmKey := func(key string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: key}}
	}
	secretKey := func(key string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}, Key: key}}
	}
	cmVolume := corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}
	secretVolume := corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sec"}}}
	projected := func(src corev1.VolumeProjection) corev1.Volume {
		return corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{src}}}}
	}
	sidecar := func(c corev1.Container) corev1.PodSpec {
		s := podSpec(corev1.Container{})
		c.Name, c.Image, c.RestartPolicy = "sidecar", "registry.example/sidecar:1", ptr.To(corev1.ContainerRestartPolicyAlways)
		s.InitContainers = []corev1.Container{c}
		return s
	}
	initContainer := func(c corev1.Container) corev1.PodSpec {
		s := podSpec(corev1.Container{})
		c.Name, c.Image = "init", "registry.example/init:1"
		s.InitContainers = []corev1.Container{c}
		return s
	}
	tests := []struct {
		name   string
		spec   corev1.PodSpec
		secret bool // the change is to the Secret, else to the ConfigMap
	}{
		{"env-configmapkeyref", podSpec(corev1.Container{Env: []corev1.EnvVar{{Name: "A", ValueFrom: cmKey("a")}}}), false},
		{"env-secretkeyref", podSpec(corev1.Container{Env: []corev1.EnvVar{{Name: "A", ValueFrom: secretKey("a")}}}), true},
		{"envfrom-configmap", podSpec(corev1.Container{EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}), false},
		{"envfrom-secret", podSpec(corev1.Container{EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}}}}}), true},
		{"volume-configmap", podSpec(corev1.Container{}, cmVolume), false},
		{"volume-secret", podSpec(corev1.Container{}, secretVolume), true},
		{"projected-configmap", podSpec(corev1.Container{}, projected(corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}})), false},
		{"projected-secret", podSpec(corev1.Container{}, projected(corev1.VolumeProjection{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}}})), true},
		{"init-container-env", initContainer(corev1.Container{Env: []corev1.EnvVar{{Name: "A", ValueFrom: cmKey("a")}}}), false},
		{"native-sidecar-envfrom", sidecar(corev1.Container{EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}}}}}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ns := namespace(t)
			cm := configMap(ns, "cfg", map[string]string{"a": "1"})
			sec := secret(ns, "sec", map[string]string{"a": "1"})
			dep := deployment(ns, "web", tt.spec)
			create(t, cm, sec)
			tr := track(t, dep)
			startWatcher(t, ns)
			waitAdopted(t, dep)

			if tt.secret {
				setSecret(t, sec, "a", "2")
			} else {
				setConfigMap(t, cm, "a", "2")
			}
			waitRollouts(t, tr, 1)
			waitRestarted(t, ns, "web", "changed (keys: a;")
			stayRollouts(t, tr, 1)
		})
	}
}
