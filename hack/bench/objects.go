package main

import (
	"encoding/json"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// namespace holds every object the benchmark makes.
const namespace = "bench"

// dataKey is the one key of every config; a change rewrites it, so every
// way of using the config (envFrom, volume, keyRef) sees the change.
const dataKey = "value"

// floorAnnotation is the pod-template annotation the benchmark itself
// changes on a floor workload.
const floorAnnotation = "bench.watcher.dev/floor-change"

func configName(j int) string      { return fmt.Sprintf("cfg-%05d", j) }
func workloadName(i int) string    { return fmt.Sprintf("app-%05d", i) }
func floorConfigName(f int) string { return fmt.Sprintf("floor-cfg-%05d", f) }
func floorName(f int) string       { return fmt.Sprintf("floor-%05d", f) }

// payload returns size bytes of config data for a version: the version
// first, so every version differs, then filler.
func payload(size, version int) []byte {
	const filler = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	b := make([]byte, 0, size)
	b = append(b, "v"+strconv.Itoa(version)+";"...)
	for len(b) < size {
		b = append(b, filler[:min(len(filler), size-len(b))]...)
	}
	return b[:size]
}

// helmLabels are the labels a Helm chart puts on every object it makes:
// watcher keeps objects' labels (for the selectors of ReloadPolicies), so
// the memory measured includes a realistic set.
func helmLabels(name string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name": name, "app.kubernetes.io/instance": "bench",
		"app.kubernetes.io/managed-by": "Helm", "helm.sh/chart": "bench-1.0.0",
	}
}

// newConfig returns a Secret or a ConfigMap holding payload(size, 0).
func newConfig(secret bool, name string, size int) runtime.Object {
	meta := metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: helmLabels(name)}
	if secret {
		return &corev1.Secret{ObjectMeta: meta, Data: map[string][]byte{dataKey: payload(size, 0)}}
	}
	return &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{dataKey: string(payload(size, 0))}}
}

// configPatch returns a JSON merge patch that sets the data of a config to
// payload(size, version).
func configPatch(secret bool, size, version int) ([]byte, error) {
	var data any = map[string]string{dataKey: string(payload(size, version))}
	if secret {
		data = map[string][]byte{dataKey: payload(size, version)} // base64 in JSON
	}
	patch, err := json.Marshal(map[string]any{"data": data})
	if err != nil {
		return nil, fmt.Errorf("marshal config patch: %w", err)
	}
	return patch, nil
}

// floorPatch returns a JSON merge patch that changes the pod template of a
// floor workload for its seq-th change.
func floorPatch(seq int) []byte {
	return fmt.Appendf(nil, `{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`,
		floorAnnotation, strconv.Itoa(seq))
}

// ref is one use of a config by a workload.
type ref struct {
	secret bool
	name   string
}

// newWorkload returns a Deployment with no replicas whose container uses
// each ref, the k-th one through envFrom, a volume or an env keyRef as
// (offset+k) mod 3 says, so a scenario mixes the three.
func newWorkload(name string, refs []ref, offset int) *appsv1.Deployment {
	c := corev1.Container{Name: "app", Image: "registry.invalid/app:1"}
	var volumes []corev1.Volume
	for k, r := range refs {
		switch (offset + k) % 3 {
		case 0:
			c.EnvFrom = append(c.EnvFrom, envFrom(r))
		case 1:
			vol := volume(r, "cfg-"+strconv.Itoa(k))
			volumes = append(volumes, vol)
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: vol.Name, MountPath: "/etc/" + vol.Name})
		default:
			c.Env = append(c.Env, keyRef(r, "CFG_"+strconv.Itoa(k)))
		}
	}
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: helmLabels(name)},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{c}, Volumes: volumes},
			},
		},
	}
}

func envFrom(r ref) corev1.EnvFromSource {
	if r.secret {
		return corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: r.name}}}
	}
	return corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: r.name}}}
}

func volume(r ref, name string) corev1.Volume {
	if r.secret {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: r.name}}}
	}
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: r.name}}}}
}

func keyRef(r ref, env string) corev1.EnvVar {
	src := &corev1.EnvVarSource{}
	if r.secret {
		src.SecretKeyRef = &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: r.name}, Key: dataKey}
	} else {
		src.ConfigMapKeyRef = &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: r.name}, Key: dataKey}
	}
	return corev1.EnvVar{Name: env, ValueFrom: src}
}

// workloadRefs returns the refs of workload i of s.
func (s Scenario) workloadRefs(i int) []ref {
	idx := s.Refs(i)
	refs := make([]ref, len(idx))
	for k, j := range idx {
		refs[k] = ref{secret: s.IsSecret(j), name: configName(j)}
	}
	return refs
}
