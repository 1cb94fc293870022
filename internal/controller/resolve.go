package controller

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/workload"
)

// resolver gives the references of a workload that watcher acts on: those of
// its pod template, less the ones into namespaces whose ConfigMaps or
// Secrets are ignored. A workload that only uses ignored objects has no
// references, so nothing is ever written to it.
type resolver struct {
	ignored map[refs.Kind]map[string]bool
}

func newResolver(ignoreConfigMaps, ignoreSecrets []string) resolver {
	set := func(ns []string) map[string]bool {
		m := make(map[string]bool, len(ns))
		for _, n := range ns {
			m[n] = true
		}
		return m
	}
	return resolver{ignored: map[refs.Kind]map[string]bool{
		refs.ConfigMap: set(ignoreConfigMaps),
		refs.Secret:    set(ignoreSecrets),
	}}
}

// Refs returns the references of obj that count.
func (rs resolver) Refs(obj client.Object) ([]refs.Ref, error) {
	uses, err := workload.Refs(obj)
	if err != nil {
		return nil, err
	}
	out := uses[:0:0]
	for _, u := range uses {
		if !rs.ignored[u.Kind][obj.GetNamespace()] {
			out = append(out, u)
		}
	}
	return out, nil
}
