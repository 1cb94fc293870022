// Package refs finds the ConfigMaps and Secrets a pod template uses.
//
// Discovery is a pure function of the pod spec: no annotation is needed. A pod
// uses a ConfigMap or Secret when any container or init container (native
// sidecars included) refers to it through
//
//	env[].valueFrom.configMapKeyRef / secretKeyRef   keys: the one key
//	envFrom[].configMapRef / secretRef               keys: all
//	volumes[].configMap / secret                     keys: items, or all
//	volumes[].projected.sources[].configMap / secret keys: items, or all
//
// References to the same object are merged: if any of them uses every key, the
// merged reference uses every key; otherwise it uses the union of the keys.
package refs

import (
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// Kind is the kind of a referenced object.
type Kind string

// The kinds a pod can refer to.
const (
	ConfigMap Kind = "ConfigMap"
	Secret    Kind = "Secret"
)

// Ref is one ConfigMap or Secret a pod template uses, in the pod's namespace.
type Ref struct {
	Kind Kind
	Name string
	// AllKeys is true when the pod sees every key (envFrom, a whole volume),
	// so that adding or removing a key is a change.
	AllKeys bool
	// Keys are the keys the pod reads when AllKeys is false, sorted, each
	// once.
	Keys []string
}

// ID returns "Kind/name", the form used in records and messages.
func (r Ref) ID() string { return string(r.Kind) + "/" + r.Name }

// Uses reports whether a change to key affects a pod using r.
func (r Ref) Uses(key string) bool {
	if r.AllKeys {
		return true
	}
	_, found := slices.BinarySearch(r.Keys, key)
	return found
}

// FromPodSpec returns every ConfigMap and Secret spec uses, sorted by kind
// and name, one Ref per object.
func FromPodSpec(spec *corev1.PodSpec) []Ref {
	c := collector{}
	for i := range spec.InitContainers {
		c.container(spec.InitContainers[i].Env, spec.InitContainers[i].EnvFrom)
	}
	for i := range spec.Containers {
		c.container(spec.Containers[i].Env, spec.Containers[i].EnvFrom)
	}
	for i := range spec.Volumes {
		c.volume(&spec.Volumes[i].VolumeSource)
	}
	return c.refs()
}

type usage struct {
	all  bool
	keys map[string]struct{}
}

type object struct {
	kind Kind
	name string
}

type collector map[object]*usage

func (c collector) add(kind Kind, name string, keys ...string) {
	if name == "" {
		return
	}
	id := object{kind, name}
	u := c[id]
	if u == nil {
		u = &usage{keys: map[string]struct{}{}}
		c[id] = u
	}
	if len(keys) == 0 {
		u.all = true
		return
	}
	for _, k := range keys {
		u.keys[k] = struct{}{}
	}
}

func (c collector) container(env []corev1.EnvVar, envFrom []corev1.EnvFromSource) {
	for _, e := range env {
		if e.ValueFrom == nil {
			continue
		}
		if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
			c.add(ConfigMap, r.Name, r.Key)
		}
		if r := e.ValueFrom.SecretKeyRef; r != nil {
			c.add(Secret, r.Name, r.Key)
		}
	}
	for _, e := range envFrom {
		if e.ConfigMapRef != nil {
			c.add(ConfigMap, e.ConfigMapRef.Name)
		}
		if e.SecretRef != nil {
			c.add(Secret, e.SecretRef.Name)
		}
	}
}

func (c collector) volume(v *corev1.VolumeSource) {
	if v.ConfigMap != nil {
		c.add(ConfigMap, v.ConfigMap.Name, itemKeys(v.ConfigMap.Items)...)
	}
	if v.Secret != nil {
		c.add(Secret, v.Secret.SecretName, itemKeys(v.Secret.Items)...)
	}
	if v.Projected == nil {
		return
	}
	for _, s := range v.Projected.Sources {
		if s.ConfigMap != nil {
			c.add(ConfigMap, s.ConfigMap.Name, itemKeys(s.ConfigMap.Items)...)
		}
		if s.Secret != nil {
			c.add(Secret, s.Secret.Name, itemKeys(s.Secret.Items)...)
		}
	}
}

func itemKeys(items []corev1.KeyToPath) []string {
	keys := make([]string, 0, len(items))
	for _, it := range items {
		keys = append(keys, it.Key)
	}
	return keys
}

func (c collector) refs() []Ref {
	out := make([]Ref, 0, len(c))
	for id, u := range c {
		r := Ref{Kind: id.kind, Name: id.name, AllKeys: u.all}
		if !u.all {
			for k := range u.keys {
				r.Keys = append(r.Keys, k)
			}
			sort.Strings(r.Keys)
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out
}
