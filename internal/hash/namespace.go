package hash

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// namespaceLabel is the text the key of a namespace is derived from, before
// the namespace's name: a namespace name has no "/", so no two namespaces
// derive from the same text.
const namespaceLabel = "watcher/namespace/"

// deriveKey returns the key of namespace: HMAC-SHA256(key, namespaceLabel +
// namespace), key being the installation's key. Knowing it tells nothing of
// key, nor of the key of any other namespace.
func deriveKey(key []byte, namespace string) []byte {
	m := hmac.New(sha256.New, key)
	_, _ = m.Write([]byte(namespaceLabel + namespace))
	return m.Sum(nil)
}

// NamespaceKey is the key of one namespace, with the ID of the
// installation's key it was derived from: what watcher explain needs to
// compare the hashes recorded on the workloads of that namespace, and no
// more. It never prints its key (String); Encode and Secret give it away, on
// purpose.
type NamespaceKey struct {
	namespace string
	key       []byte
	id        string
}

// NamespaceKey returns the key of namespace.
func (h *Hasher) NamespaceKey(namespace string) NamespaceKey {
	return NamespaceKey{namespace: namespace, key: deriveKey(h.key, namespace), id: h.id}
}

// Namespace is the namespace whose hashes k computes.
func (k NamespaceKey) Namespace() string { return k.namespace }

// ID is the ID of the installation's key k was derived from (Hasher.ID):
// records that carry another were made with another key.
func (k NamespaceKey) ID() string { return k.id }

// String names k without its key.
func (k NamespaceKey) String() string {
	return fmt.Sprintf("key of namespace %s (hash key %s)", k.namespace, k.id)
}

// OfObject returns the digest of the content of a ConfigMap or Secret of
// k's namespace, as Hasher.OfObject does; it fails for an object of another
// namespace.
func (k NamespaceKey) OfObject(obj any) (Digest, error) {
	src, data, err := contentOf(obj)
	if err != nil {
		return Digest{}, err
	}
	if src.Namespace != k.namespace {
		return Digest{}, fmt.Errorf("%s %s/%s: the key is for namespace %s", src.Kind, src.Namespace, src.Name, k.namespace)
	}
	return digest(k.key, src, data), nil
}

// Encode writes k as one line, "namespace:id:key" (the key in unpadded
// base64url), for watcher explain --explain-key; ParseNamespaceKey reads it.
func (k NamespaceKey) Encode() string {
	return k.namespace + ":" + k.id + ":" + base64.RawURLEncoding.EncodeToString(k.key)
}

// ParseNamespaceKey reads what Encode writes. Its errors quote no part of
// s, which may be anything pasted.
func ParseNamespaceKey(s string) (NamespaceKey, error) {
	parts := strings.Split(strings.TrimSpace(s), ":")
	if len(parts) != 3 {
		return NamespaceKey{}, fmt.Errorf("not a namespace key: want NAMESPACE:ID:KEY, as watcher key derive prints it")
	}
	key, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return NamespaceKey{}, fmt.Errorf("not a namespace key: its key is not base64url")
	}
	return newNamespaceKey(parts[0], parts[1], key)
}

// newNamespaceKey checks the parts of a NamespaceKey read from outside.
func newNamespaceKey(namespace, id string, key []byte) (NamespaceKey, error) {
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return NamespaceKey{}, fmt.Errorf("not a namespace key: its namespace is not a namespace name")
	}
	if len(id) != KeyHashLen || strings.Trim(id, "0123456789abcdef") != "" {
		return NamespaceKey{}, fmt.Errorf("not a namespace key: its ID is not a hash key ID (%d hex digits)", KeyHashLen)
	}
	if len(key) != sha256.Size {
		return NamespaceKey{}, fmt.Errorf("not a namespace key: its key has %d bytes, not %d", len(key), sha256.Size)
	}
	return NamespaceKey{namespace: namespace, key: slices.Clone(key), id: id}, nil
}

// The data keys of a namespace key Secret.
const (
	nsKeyNamespace = "namespace"
	nsKeyID        = "hash-key-id"
	nsKeyKey       = "key"
)

// Secret returns the Secret name, in k's namespace, that holds k.
func (k NamespaceKey) Secret(name string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: k.namespace, Name: name, Labels: map[string]string{"app.kubernetes.io/managed-by": "watcher"}},
		Data: map[string][]byte{
			nsKeyNamespace: []byte(k.namespace),
			nsKeyID:        []byte(k.id),
			nsKeyKey:       slices.Clone(k.key),
		},
	}
}

// NamespaceKeyOf returns the NamespaceKey a Secret made by
// NamespaceKey.Secret holds. A key for another namespace than the Secret's
// is refused: its hashes would compare with nothing.
func NamespaceKeyOf(s *corev1.Secret) (NamespaceKey, error) {
	k, err := newNamespaceKey(string(s.Data[nsKeyNamespace]), string(s.Data[nsKeyID]), s.Data[nsKeyKey])
	if err != nil {
		return NamespaceKey{}, fmt.Errorf("secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	if k.namespace != s.Namespace {
		return NamespaceKey{}, fmt.Errorf("secret %s/%s holds the key of namespace %s", s.Namespace, s.Name, k.namespace)
	}
	return k, nil
}
