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
//
// A key is required when a reference that names it is not optional: without
// it the pod cannot start (the kubelet fails the env var or the volume).
//
//	reference                                        key required when
//	env[].valueFrom.configMapKeyRef / secretKeyRef   its optional is unset or false
//	volumes[].configMap / secret, items              the volume's optional is unset or false
//	volumes[].projected.sources[].configMap / secret the source's optional is unset or false
//	envFrom, whole volumes                           never: they name no key
//
// A key is required in the merged reference when any reference requires it;
// no key is when the merged reference uses every key.
package refs

import (
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/watcher-dev/watcher/internal/object"
)

// Kind is the kind of a referenced object.
type Kind string

// The kinds a pod can refer to.
const (
	ConfigMap Kind = "ConfigMap"
	Secret    Kind = "Secret"
	// SecretProviderClass is no reference of the pod spec: a workload whose
	// pods mount a class through the Secrets Store CSI Driver is given one
	// (package csi), its keys the ids of the objects mounted.
	SecretProviderClass Kind = "SecretProviderClass"
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
	// Required are the keys of Keys that some reference which is not
	// optional names (see the package comment): if one disappears, new pods
	// cannot start. Sorted; empty when AllKeys.
	Required []string
	// Optional is true when every reference to the object is optional:
	// pods start without it.
	Optional bool
}

// ID returns "Kind/name", the form used in records and messages.
func (r Ref) ID() string { return string(r.Kind) + "/" + r.Name }

// Object returns the object r names in namespace (refs name objects of
// the workload's namespace).
func (r Ref) Object(namespace string) object.Ref {
	return object.Ref{Kind: string(r.Kind), Namespace: namespace, Name: r.Name}
}

// Uses reports whether a change to key affects a pod using r.
func (r Ref) Uses(key string) bool {
	if r.AllKeys {
		return true
	}
	_, found := slices.BinarySearch(r.Keys, key)
	return found
}

// Requires reports whether key is one of r.Required.
func (r Ref) Requires(key string) bool {
	_, found := slices.BinarySearch(r.Required, key)
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

// usage is what the references to one object use: every key, or the keys
// in keys, each true when some reference requires it.
type usage struct {
	all  bool
	keys map[string]bool
	// needed is true when some reference to the object is not optional.
	needed bool
}

type objectID struct {
	kind Kind
	name string
}

type collector map[objectID]*usage

// add records a reference to the object kind/name that reads keys, or
// every key if there are none. optional is the reference's own field.
func (c collector) add(kind Kind, name string, optional *bool, keys ...string) {
	if name == "" {
		return
	}
	id := objectID{kind, name}
	u := c[id]
	if u == nil {
		u = &usage{keys: map[string]bool{}}
		c[id] = u
	}
	required := optional == nil || !*optional
	u.needed = u.needed || required
	if len(keys) == 0 {
		u.all = true
		return
	}
	for _, k := range keys {
		u.keys[k] = u.keys[k] || required
	}
}

func (c collector) container(env []corev1.EnvVar, envFrom []corev1.EnvFromSource) {
	for _, e := range env {
		if e.ValueFrom == nil {
			continue
		}
		if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
			c.add(ConfigMap, r.Name, r.Optional, r.Key)
		}
		if r := e.ValueFrom.SecretKeyRef; r != nil {
			c.add(Secret, r.Name, r.Optional, r.Key)
		}
	}
	for _, e := range envFrom {
		if e.ConfigMapRef != nil {
			c.add(ConfigMap, e.ConfigMapRef.Name, e.ConfigMapRef.Optional)
		}
		if e.SecretRef != nil {
			c.add(Secret, e.SecretRef.Name, e.SecretRef.Optional)
		}
	}
}

func (c collector) volume(v *corev1.VolumeSource) {
	if v.ConfigMap != nil {
		c.add(ConfigMap, v.ConfigMap.Name, v.ConfigMap.Optional, itemKeys(v.ConfigMap.Items)...)
	}
	if v.Secret != nil {
		c.add(Secret, v.Secret.SecretName, v.Secret.Optional, itemKeys(v.Secret.Items)...)
	}
	if v.Projected == nil {
		return
	}
	for _, s := range v.Projected.Sources {
		if s.ConfigMap != nil {
			c.add(ConfigMap, s.ConfigMap.Name, s.ConfigMap.Optional, itemKeys(s.ConfigMap.Items)...)
		}
		if s.Secret != nil {
			c.add(Secret, s.Secret.Name, s.Secret.Optional, itemKeys(s.Secret.Items)...)
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
		r := Ref{Kind: id.kind, Name: id.name, AllKeys: u.all, Optional: !u.needed}
		if !u.all {
			for k := range u.keys {
				r.Keys = append(r.Keys, k)
			}
			sort.Strings(r.Keys)
			for _, k := range r.Keys {
				if u.keys[k] {
					r.Required = append(r.Required, k)
				}
			}
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out
}
