package hash

import (
	"context"
	"crypto/rand"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// keyField is the data key of the hash key in its Secret.
const keyField = "key"

// LoadKey returns the hash key kept in the Secret namespace/name, creating
// the Secret with 32 random bytes if it does not exist. Replicas starting
// together agree: the first create wins and the others read its key.
//
// Losing the Secret is safe: the next start makes a new key, and records made
// with the old one are adopted again rather than compared (see Hasher.ID).
func LoadKey(ctx context.Context, c client.Client, namespace, name string) ([]byte, error) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	for range 3 {
		var s corev1.Secret
		err := c.Get(ctx, key, &s)
		if err == nil {
			return KeyOf(&s)
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("get hash key secret %s: %w", key, err)
		}
		b := make([]byte, 32)
		_, _ = rand.Read(b) // never fails
		s = *keySecret(namespace, name, b)
		err = c.Create(ctx, &s)
		if err == nil {
			return b, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create hash key secret %s: %w", key, err)
		}
	}
	return nil, fmt.Errorf("hash key secret %s: created and deleted concurrently; try again", key)
}

// KeyOf returns the hash key a key Secret holds.
func KeyOf(s *corev1.Secret) ([]byte, error) {
	if len(s.Data[keyField]) < 16 {
		return nil, fmt.Errorf("secret %s/%s holds no hash key in %q (16 bytes at least): delete it and watcher makes a new one", s.Namespace, s.Name, keyField)
	}
	return s.Data[keyField], nil
}

// keySecret returns the Secret that holds key.
func keySecret(namespace, name string, key []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"app.kubernetes.io/managed-by": "watcher"}},
		Data:       map[string][]byte{keyField: key},
	}
}
