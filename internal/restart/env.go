package restart

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
)

// EnvName is the environment variable the env strategy sets.
const EnvName = "WATCHER_CONFIG_HASH"

// Env restarts by setting the environment variable EnvName to the restart
// ID on every container and init container of the pod template (the
// "env-vars" strategy of Stakater's Reloader).
//
// A JSON merge patch replaces whole lists, so it would have to carry every
// container in full. Env sends a strategic merge patch instead: the API
// server merges containers, and their env vars, by name, so the patch names
// each container and sets one variable, and every other container and env
// var stays as it is, in its order. The first restart puts the variable
// ahead of the container's own (a strategic merge puts the items a list
// lacks first), which no other variable can depend on, as it is a literal;
// later restarts change its value in place.
//
// The patch needs the names of the containers: from ContainersAnnotation on
// a workload from watcher's store, else from the pod template of a typed
// object. The resourceVersion precondition of the patch guarantees they are
// the names of the template it changes: a patch naming a container the
// template lacks would add one with no image, which the API server refuses.
//
// Where it cannot be written, Env writes what Annotation does:
//
//	workload                                              patch
//	a kind the API server merges strategically (the       strategic merge, env var
//	built-in kinds: apps/v1, batch/v1)
//	a kind without strategic merge (a custom resource,    merge patch, annotation
//	which takes only merge and JSON patches)
//	container names unknown (a template watcher could     merge patch, annotation
//	not read)
//
// A JSON patch could set a variable in a custom resource, but only by list
// index, which the metadata-only objects of the store do not know, and
// indexes move when the user edits the list.
type Env struct{}

// Name implements Strategy.
func (Env) Name() string { return "env" }

// Template implements Strategy.
func (Env) Template(w Workload) (types.PatchType, map[string]any) {
	names, ok := containers(w)
	if !ok || !strategicMerge(w) {
		return Annotation{}.Template(w)
	}
	spec := map[string]any{"containers": setEnv(names.Containers, w.ID)}
	if len(names.Init) > 0 {
		spec["initContainers"] = setEnv(names.Init, w.ID)
	}
	return types.StrategicMergePatchType, map[string]any{"spec": spec}
}

// setEnv returns the strategic merge patch of a container list setting
// EnvName to value on each container named.
func setEnv(names []string, value string) []any {
	out := make([]any, len(names))
	for i, n := range names {
		out[i] = map[string]any{"name": n, "env": []any{map[string]any{"name": EnvName, "value": value}}}
	}
	return out
}

// strategicMerge tells whether the API server takes a strategic merge patch
// of w's kind: it does for the kinds compiled into it, which are the kinds
// of client-go's scheme; a custom resource gets 415 Unsupported Media Type.
func strategicMerge(w Workload) bool {
	_, err := scheme.Scheme.New(w.Kind.GVK)
	return err == nil
}

// ContainersAnnotation holds, on a workload in watcher's store, the names
// of the containers of its pod template (EncodeContainers), which the store
// does not keep. Like workload.RefsAnnotation, the key is not a valid
// annotation key, so no object from the API server can carry it.
const ContainersAnnotation = "watcher.dev/cached/containers"

// Containers are the names of the containers of a pod template, in order.
type Containers struct {
	Containers []string
	Init       []string
}

// ContainersOf returns the names of the containers of spec.
func ContainersOf(spec *corev1.PodSpec) Containers {
	var c Containers
	for _, x := range spec.Containers {
		c.Containers = append(c.Containers, x.Name)
	}
	for _, x := range spec.InitContainers {
		c.Init = append(c.Init, x.Name)
	}
	return c
}

// EncodeContainers encodes c for ContainersAnnotation as
// "app,sidecar;init": container names are DNS labels, which hold neither
// "," nor ";".
func EncodeContainers(c Containers) string {
	return strings.Join(c.Containers, ",") + ";" + strings.Join(c.Init, ",")
}

// DecodeContainers decodes what EncodeContainers made; false if s is not
// such a value or names no container (a pod needs one).
func DecodeContainers(s string) (Containers, bool) {
	main, init, ok := strings.Cut(s, ";")
	if !ok || main == "" || strings.Contains(init, ";") {
		return Containers{}, false
	}
	c := Containers{Containers: strings.Split(main, ",")}
	if init != "" {
		c.Init = strings.Split(init, ",")
	}
	return c, true
}

// containers returns the names of w's containers: from ContainersAnnotation
// on a stored workload, else from the pod template of the object (none for
// a metadata-only object without the annotation).
func containers(w Workload) (Containers, bool) {
	if s, ok := w.Object.GetAnnotations()[ContainersAnnotation]; ok {
		return DecodeContainers(s)
	}
	tmpl, err := w.Kind.PodTemplate(w.Object)
	if err != nil {
		return Containers{}, false
	}
	c := ContainersOf(&tmpl.Spec)
	return c, len(c.Containers) > 0
}
