package hash

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/watcher-dev/watcher/internal/attribution"
	"github.com/watcher-dev/watcher/internal/packed"
	"github.com/watcher-dev/watcher/internal/slim"
)

// The annotations that carry a digest on the PartialObjectMetadata watcher
// keeps of a ConfigMap or Secret. The keys are deliberately not valid
// annotation keys (they have two slashes), so no object coming from the API
// server can carry them: a digest can never be mistaken for real data.
const (
	// SumAnnotation holds Digest.Sum, as raw bytes (see EncodeSum).
	SumAnnotation = "watcher.dev/digest/sha256"
	// KeysAnnotation holds Digest.Keys, sorted, the hashes as raw bytes
	// (see EncodeKeys).
	KeysAnnotation = "watcher.dev/digest/keys"
)

// OfObject returns the digest of the content of a ConfigMap (data and
// binaryData) or Secret (data).
func (h *Hasher) OfObject(obj any) (Digest, error) {
	src, data, err := contentOf(obj)
	if err != nil {
		return Digest{}, err
	}
	return h.Of(src, data), nil
}

// contentOf returns where a ConfigMap or Secret lives and its content.
func contentOf(obj any) (Source, map[string][]byte, error) {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		data := make(map[string][]byte, len(o.Data)+len(o.BinaryData))
		for k, v := range o.Data {
			data[k] = []byte(v)
		}
		for k, v := range o.BinaryData {
			data[k] = v
		}
		return Source{"ConfigMap", o.Namespace, o.Name}, data, nil
	case *corev1.Secret:
		return Source{"Secret", o.Namespace, o.Name}, o.Data, nil
	default:
		return Source{}, nil, fmt.Errorf("%T is not a ConfigMap or Secret", obj)
	}
}

// Transform returns a cache transform that replaces a ConfigMap or Secret
// by a PartialObjectMetadata holding its trimmed metadata (slim.Meta, with
// the annotations in keep), its digest and the field managers that wrote
// its content (attribution.Annotation). The content is dropped; nothing of
// it but the keyed hashes stays in memory, and of managedFields only the
// writers of the content. Objects already transformed, and any other
// object, pass through unchanged.
func (h *Hasher) Transform(keep ...string) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		var meta *metav1.ObjectMeta
		var kind string
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			meta, kind = &o.ObjectMeta, "ConfigMap"
		case *corev1.Secret:
			meta, kind = &o.ObjectMeta, "Secret"
		default:
			return obj, nil
		}
		d, err := h.OfObject(obj)
		if err != nil {
			return nil, err
		}
		out := &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: kind},
			ObjectMeta: slim.Meta(*meta, keep),
		}
		if out.Annotations == nil {
			out.Annotations = make(map[string]string, 2)
		}
		out.Annotations[SumAnnotation] = EncodeSum(d.Sum)
		out.Annotations[KeysAnnotation] = encodeKeys(d.Keys)
		if w := attribution.FromManagedFields(meta.ManagedFields); len(w) > 0 {
			// The same few managers write most objects.
			out.Annotations[attribution.Annotation] = unique.Make(attribution.Encode(w)).Value()
		}
		return out, nil
	}
}

// FromObject returns the digest an object made by Transform carries. It
// fails for any other object, so a caller can never mistake real data for
// a digest.
func FromObject(obj metav1.Object) (Digest, error) {
	sum, ok := packed.Annotation(obj, SumAnnotation)
	keys, ok2 := packed.Annotation(obj, KeysAnnotation)
	if !ok || !ok2 {
		return Digest{}, fmt.Errorf("%s/%s carries no digest", obj.GetNamespace(), obj.GetName())
	}
	if len(sum) != sha256.Size {
		return Digest{}, fmt.Errorf("%s/%s: bad digest sum", obj.GetNamespace(), obj.GetName())
	}
	d, err := decodeKeys(keys)
	if err != nil {
		return Digest{}, fmt.Errorf("%s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return Digest{Sum: hex.EncodeToString([]byte(sum)), Keys: d}, nil
}
