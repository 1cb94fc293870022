package hash

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// SumAnnotation marks a cached object whose data has been replaced by its
// digest and holds the digest's Sum. The key is deliberately not a valid
// annotation key (it has two slashes), so no object coming from the API server
// can carry it: that is how the transforms tell a digest from real data, and
// why applying them twice is harmless (client-go may do so).
const SumAnnotation = "watcher.dev/digest/sha256"

// lastApplied is written by `kubectl apply` and holds a full copy of the
// object, Secret values included.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// TransformConfigMap is a cache transform that replaces a ConfigMap's data
// and binaryData with their digest (see FromObject).
func (h *Hasher) TransformConfigMap(obj any) (any, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok || digested(cm.Annotations) {
		return obj, nil
	}
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	d := h.Of(data)
	cm.Data, cm.BinaryData = d.Keys, nil
	stripMetadata(cm, d.Sum)
	return cm, nil
}

// TransformSecret is a cache transform that replaces a Secret's data with its
// digest (see FromObject).
func (h *Hasher) TransformSecret(obj any) (any, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok || digested(s.Annotations) {
		return obj, nil
	}
	d := h.Of(s.Data)
	s.Data = make(map[string][]byte, len(d.Keys))
	for k, h := range d.Keys {
		s.Data[k] = []byte(h)
	}
	s.StringData = nil
	stripMetadata(s, d.Sum)
	return s, nil
}

// Transform applies TransformConfigMap or TransformSecret, whichever fits
// obj.
func (h *Hasher) Transform(obj any) (any, error) {
	if _, ok := obj.(*corev1.Secret); ok {
		return h.TransformSecret(obj)
	}
	return h.TransformConfigMap(obj)
}

var (
	_ toolscache.TransformFunc = (*Hasher)(nil).TransformConfigMap
	_ toolscache.TransformFunc = (*Hasher)(nil).TransformSecret
)

func digested(annotations map[string]string) bool {
	_, ok := annotations[SumAnnotation]
	return ok
}

func stripMetadata(obj metav1.Object, sum string) {
	obj.SetManagedFields(nil)
	a := obj.GetAnnotations()
	delete(a, lastApplied)
	if a == nil {
		a = map[string]string{}
	}
	a[SumAnnotation] = sum
	obj.SetAnnotations(a)
}

// FromObject returns the digest of a ConfigMap or Secret that went through
// TransformConfigMap or TransformSecret. It fails for any other object, so a
// caller can never mistake real data for a digest.
func FromObject(obj any) (Digest, error) {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		sum, ok := o.Annotations[SumAnnotation]
		if !ok {
			return Digest{}, fmt.Errorf("configmap %s/%s has no digest", o.Namespace, o.Name)
		}
		return Digest{Sum: sum, Keys: o.Data}, nil
	case *corev1.Secret:
		sum, ok := o.Annotations[SumAnnotation]
		if !ok {
			return Digest{}, fmt.Errorf("secret %s/%s has no digest", o.Namespace, o.Name)
		}
		keys := make(map[string]string, len(o.Data))
		for k, v := range o.Data {
			keys[k] = string(v)
		}
		return Digest{Sum: sum, Keys: keys}, nil
	default:
		return Digest{}, fmt.Errorf("%T is not a ConfigMap or Secret", obj)
	}
}
