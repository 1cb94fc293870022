package refs

import (
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// The ways a pod spec refers to a ConfigMap or Secret (Path.Via).
const (
	ViaEnv       = "env"       // env[].valueFrom.configMapKeyRef / secretKeyRef
	ViaEnvFrom   = "envFrom"   // envFrom[].configMapRef / secretRef
	ViaVolume    = "volume"    // volumes[].configMap / secret
	ViaProjected = "projected" // volumes[].projected.sources[].configMap / secret
)

// Path is one place of a pod spec that refers to a ConfigMap or Secret. A
// Ref of FromPodSpec merges every Path to its object; Paths says where each
// came from, for people (watcher explain, watcher graph).
type Path struct {
	Kind Kind
	Name string
	// Via is how the pod reads the object: ViaEnv, ViaEnvFrom, ViaVolume or
	// ViaProjected.
	Via string
	// Where names the field: "containers[app].env[DB_PASSWORD]",
	// "initContainers[init].envFrom[0]", "volumes[config]".
	Where string
	// Keys are the keys read there, in the pod spec's order; empty when
	// every key is read.
	Keys []string
	// Optional is the reference's own optional field.
	Optional bool
}

// ID returns "Kind/name", as Ref.ID.
func (p Path) ID() string { return string(p.Kind) + "/" + p.Name }

// Paths returns every reference of spec to a ConfigMap or Secret, one per
// place, sorted by object (as FromPodSpec), then in the pod spec's order:
// init containers, containers, volumes. The objects are exactly those of
// FromPodSpec(spec).
func Paths(spec *corev1.PodSpec) []Path {
	var out []Path
	add := func(p Path) {
		if p.Name != "" {
			out = append(out, p)
		}
	}
	containers := func(field string, cs []corev1.Container) {
		for _, c := range cs {
			at := field + "[" + c.Name + "]"
			for _, e := range c.Env {
				if e.ValueFrom == nil {
					continue
				}
				if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
					add(Path{ConfigMap, r.Name, ViaEnv, at + ".env[" + e.Name + "]", []string{r.Key}, isTrue(r.Optional)})
				}
				if r := e.ValueFrom.SecretKeyRef; r != nil {
					add(Path{Secret, r.Name, ViaEnv, at + ".env[" + e.Name + "]", []string{r.Key}, isTrue(r.Optional)})
				}
			}
			for i, e := range c.EnvFrom {
				where := at + ".envFrom[" + strconv.Itoa(i) + "]"
				if e.ConfigMapRef != nil {
					add(Path{ConfigMap, e.ConfigMapRef.Name, ViaEnvFrom, where, nil, isTrue(e.ConfigMapRef.Optional)})
				}
				if e.SecretRef != nil {
					add(Path{Secret, e.SecretRef.Name, ViaEnvFrom, where, nil, isTrue(e.SecretRef.Optional)})
				}
			}
		}
	}
	containers("initContainers", spec.InitContainers)
	containers("containers", spec.Containers)
	for _, v := range spec.Volumes {
		at := "volumes[" + v.Name + "]"
		if s := v.ConfigMap; s != nil {
			add(Path{ConfigMap, s.Name, ViaVolume, at, itemKeys(s.Items), isTrue(s.Optional)})
		}
		if s := v.Secret; s != nil {
			add(Path{Secret, s.SecretName, ViaVolume, at, itemKeys(s.Items), isTrue(s.Optional)})
		}
		if v.Projected == nil {
			continue
		}
		for i, s := range v.Projected.Sources {
			where := at + ".projected.sources[" + strconv.Itoa(i) + "]"
			if s.ConfigMap != nil {
				add(Path{ConfigMap, s.ConfigMap.Name, ViaProjected, where, itemKeys(s.ConfigMap.Items), isTrue(s.ConfigMap.Optional)})
			}
			if s.Secret != nil {
				add(Path{Secret, s.Secret.Name, ViaProjected, where, itemKeys(s.Secret.Items), isTrue(s.Secret.Optional)})
			}
		}
	}
	for i := range out {
		if len(out[i].Keys) == 0 {
			out[i].Keys = nil
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out
}

func isTrue(b *bool) bool { return b != nil && *b }
