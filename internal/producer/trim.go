package producer

import (
	"crypto/sha3"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/watcher-dev/watcher/internal/note"
)

// versionAnnotation holds, on a trimmed ExternalSecret, the version ESO
// computes for it (Version), since its labels and annotations are not
// kept. Like watcher's other cached annotations, the key is not a valid
// annotation key: no object from the API server carries it.
const versionAnnotation = "watcher.dev/cached/eso/version"

// onceField is true, at the top of a trimmed ExternalSecret, when External
// Secrets syncs it only once (esSyncsOnce).
const onceField = "watcherSyncsOnce"

// targetField holds, at the top of a trimmed object, the name of the
// Secret it produces ("": none).
const targetField = "watcherTarget"

// Version returns the version External Secrets (v0.16.2) computes for an
// ExternalSecret and compares with status.syncedResourceVersion
// (pkg/controllers/util.GetResourceVersion): its generation, "-", and the
// hex SHA3-224 of the %+v text of a struct of its annotations then its
// labels (utils.ObjectHash of HashMeta's struct). fmt prints map keys
// sorted, and a nil map as an empty one, so the text is deterministic.
// Any change of its labels or annotations (a force-sync annotation) or of
// its spec moves it.
func Version(generation int64, labels, annotations map[string]string) string {
	// The same shape as ESO's, field names and order included: they are
	// part of the text hashed.
	type meta struct {
		annotations map[string]string
		labels      map[string]string
	}
	text := fmt.Sprintf("%+v", meta{annotations: annotations, labels: labels})
	return fmt.Sprintf("%d-%x", generation, sha3.Sum224([]byte(text)))
}

// Trim returns what is kept of a producer of kind k: its name, namespace,
// UID, resource version, generation and deletion time; the name of the
// Secret it produces (targetField); for an ExternalSecret the version ESO
// computes (versionAnnotation) and whether it syncs only once (onceField);
// and of its status only the conditions
// (type, status, reason, observedGeneration, message cut),
// observedGeneration and syncedResourceVersion. Its spec, labels,
// annotations and the rest of its status are dropped: never a SealedSecret's
// ciphertext nor an ExternalSecret's data spec.
func Trim(k *kind, u *unstructured.Unstructured) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetAPIVersion(u.GetAPIVersion())
	out.SetKind(u.GetKind())
	out.SetName(u.GetName())
	out.SetNamespace(u.GetNamespace())
	out.SetUID(u.GetUID())
	out.SetResourceVersion(u.GetResourceVersion())
	out.SetGeneration(u.GetGeneration())
	out.SetDeletionTimestamp(u.GetDeletionTimestamp())
	if k.gvk.Group == externalSecretV1.gvk.Group {
		out.SetAnnotations(map[string]string{versionAnnotation: Version(u.GetGeneration(), u.GetLabels(), u.GetAnnotations())})
		if esSyncsOnce(u) {
			out.Object[onceField] = true
		}
	}
	out.Object[targetField] = k.target(u)
	status, _, _ := unstructured.NestedFieldNoCopy(u.Object, "status")
	if m, ok := status.(map[string]any); ok {
		kept := map[string]any{}
		for _, f := range []string{"observedGeneration", "syncedResourceVersion"} {
			if v, ok := m[f]; ok {
				kept[f] = scalar(v)
			}
		}
		if v, ok := m["conditions"]; ok {
			kept["conditions"] = trimConditions(v)
		}
		out.Object["status"] = kept
	} else if status != nil {
		out.Object["status"] = "malformed"
	}
	return out
}

// trimConditions keeps the fields the rules read of at most maxConditions
// conditions; a value that is not a list is kept as a marker, so that the
// rules still call it malformed.
func trimConditions(v any) any {
	list, ok := v.([]any)
	if !ok {
		return "malformed"
	}
	out := make([]any, 0, min(len(list), maxConditions))
	for i, item := range list {
		if i == maxConditions {
			break
		}
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		c := map[string]any{}
		for _, f := range []string{"type", "status", "reason", "message", "observedGeneration"} {
			if v, ok := m[f]; ok {
				c[f] = scalar(v)
			}
		}
		out = append(out, c)
	}
	return out
}

// scalar returns v if it is a number or a bool, a string cut to a bound,
// and a marker for anything else: what a tenant writes is kept bounded.
func scalar(v any) any {
	switch s := v.(type) {
	case string:
		return note.Cut(s, 2*maxMessage)
	case int64, int, int32, float64, bool:
		return s
	}
	return "malformed"
}

// transform returns the informer transform of kind k (Trim); objects
// already trimmed, and any other object, pass through.
func transform(k *kind) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		if _, trimmed := u.Object[targetField]; trimmed {
			return u, nil
		}
		return Trim(k, u), nil
	}
}

// target returns the Secret a trimmed object produces.
func target(u *unstructured.Unstructured) string {
	s, _ := u.Object[targetField].(string)
	return s
}

// syncsOnce tells whether a trimmed ExternalSecret is synced only once.
func syncsOnce(u *unstructured.Unstructured) bool {
	once, _ := u.Object[onceField].(bool)
	return once
}

// cachedVersion returns the version Trim computed for an ExternalSecret.
func cachedVersion(u *unstructured.Unstructured) string {
	return u.GetAnnotations()[versionAnnotation]
}
