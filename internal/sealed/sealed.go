// Package sealed reports the changes of Bitnami Sealed Secrets
// (bitnami.com/v1alpha1 SealedSecret): each creation, update and deletion
// is logged, counted and announced by an Event on the SealedSecret, naming
// the keys concerned and never anything else of the content.
//
// A SealedSecret is kept in memory as a metav1.PartialObjectMetadata (see
// Transform): its trimmed metadata and, for each key of spec.encryptedData,
// a keyed hash of the key's ciphertext, in the annotations package hash uses
// for ConfigMaps and Secrets. The ciphertext itself is dropped as it
// arrives. Its hash tells which keys were sealed again; it reveals nothing of
// the value: the ciphertext is already public by design (it is committed to
// Git), is encrypted with a random session key (sealing the same value twice
// gives two ciphertexts) and is hashed with watcher's secret hash key on
// top. The same value sealed again therefore counts as a changed key.
//
// The Secret the sealed-secrets controller makes from a SealedSecret names
// it in its ownerReferences; Owner reads that, so that a restart caused by
// the Secret can name the SealedSecret it came from.
package sealed

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/slim"
)

// GVK and GVR name SealedSecrets.
var (
	GVK = schema.GroupVersionKind{Group: "bitnami.com", Version: "v1alpha1", Kind: "SealedSecret"}
	GVR = GVK.GroupVersion().WithResource("sealedsecrets")
)

// The events reported, the event label of
// watcher_sealedsecret_changes_total.
const (
	Created = "created"
	Updated = "updated"
	Deleted = "deleted"
)

// Transform returns a cache transform that replaces a SealedSecret (an
// unstructured object) by a PartialObjectMetadata holding its trimmed
// metadata (slim.Meta, no annotations) and the digest h makes of its
// spec.encryptedData, key by key (see the package comment). Objects already
// transformed, and any other object, pass through unchanged.
func Transform(h *hash.Hasher) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		enc, _, _ := unstructured.NestedMap(u.Object, "spec", "encryptedData")
		data := make(map[string][]byte, len(enc))
		for k, v := range enc {
			// A key no Secret may hold is left out: the sealed-secrets
			// controller refuses it too, and it could not be encoded.
			if len(validation.IsConfigMapKey(k)) > 0 {
				continue
			}
			s, _ := v.(string) // the CRD's schema says string
			data[k] = []byte(s)
		}
		d := h.Of(hash.Source{Kind: GVK.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}, data)
		out := &metav1.PartialObjectMetadata{
			TypeMeta: metav1.TypeMeta{APIVersion: GVK.GroupVersion().String(), Kind: GVK.Kind},
			ObjectMeta: slim.Meta(metav1.ObjectMeta{
				Name: u.GetName(), Namespace: u.GetNamespace(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion(),
				Generation: u.GetGeneration(), DeletionTimestamp: u.GetDeletionTimestamp(),
			}, nil),
		}
		out.Annotations = map[string]string{hash.SumAnnotation: hash.EncodeSum(d.Sum), hash.KeysAnnotation: hash.EncodeKeys(d.Keys)}
		return out, nil
	}
}

// Change returns what to report of a SealedSecret that went from old to
// new, as their digests' key hashes (nil: absent), and the keys concerned,
// sorted:
//
//	old     new     event    keys
//	nil     any     created  every key of new
//	any     nil     deleted  every key of old
//	a       b       updated  the keys added, removed or sealed again
//	a       a       ""       none: metadata or status only, not reported
func Change(old, new map[string]string) (event string, keys []string) {
	switch {
	case old == nil:
		return Created, sortedKeys(new)
	case new == nil:
		return Deleted, sortedKeys(old)
	}
	if keys = hash.ChangedKeys(old, new); len(keys) == 0 {
		return "", nil
	}
	return Updated, keys
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// OwnerReferences returns the references in refs to a SealedSecret, for the
// trimmed metadata of a Secret: what Owner reads.
func OwnerReferences(refs []metav1.OwnerReference) []metav1.OwnerReference {
	var out []metav1.OwnerReference
	for _, r := range refs {
		if isSealedSecret(r) {
			out = append(out, metav1.OwnerReference{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name, UID: r.UID, Controller: r.Controller})
		}
	}
	return out
}

// Owner returns the name of the SealedSecret that obj, a Secret, was made
// from (its owner reference; a SealedSecret is in the namespace of its
// Secret), or "".
func Owner(obj metav1.Object) string {
	for _, r := range obj.GetOwnerReferences() {
		if isSealedSecret(r) {
			return r.Name
		}
	}
	return ""
}

func isSealedSecret(r metav1.OwnerReference) bool {
	gv, err := schema.ParseGroupVersion(r.APIVersion)
	return err == nil && gv.Group == GVK.Group && r.Kind == GVK.Kind
}

// KeepOwner wraps next, the transform of Secrets, so that the Secret it
// keeps holds its SealedSecret owner references, for Owner.
func KeepOwner(next toolscache.TransformFunc) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		s, isSecret := obj.(*corev1.Secret)
		var owners []metav1.OwnerReference
		if isSecret {
			owners = OwnerReferences(s.OwnerReferences) // before next may reuse s
		}
		out, err := next(obj)
		if m, ok := out.(*metav1.PartialObjectMetadata); ok && err == nil && isSecret {
			m.OwnerReferences = owners
		}
		return out, err
	}
}
