package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/hash"
)

// derive runs watcher key derive: it reads the installation's hash key and
// prints the key of the namespace r reads (-n), or with --write puts it in
// the Secret --explain-key-secret of that namespace. Printing that one key
// is what the command is for; nothing else derived from a Secret is ever
// printed, and its errors quote no key.
func (c *command) derive(ctx context.Context, r *reader, out io.Writer) error {
	var sec corev1.Secret
	name := types.NamespacedName{Namespace: c.watcherNamespace, Name: c.installation.HashKeySecret}
	if err := r.c.Get(ctx, name, &sec); err != nil {
		return fmt.Errorf("read the hash key Secret %s (--watcher-namespace, --hash-key-secret): %w", name, err)
	}
	key, err := hash.KeyOf(&sec)
	if err != nil {
		return err
	}
	k := hash.NewHasher(key).NamespaceKey(r.namespace)
	if !c.write {
		_, err := fmt.Fprintln(out, k.Encode())
		return err
	}
	if err := writeKeySecret(ctx, r.c, k.Secret(c.explainKeySecret)); err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "Secret %s/%s holds the key of namespace %s (hash key %s)\n", r.namespace, c.explainKeySecret, k.Namespace(), k.ID())
	return err
}

// writeKeySecret creates s, or merges its labels and data into the Secret
// of that name.
func writeKeySecret(ctx context.Context, c client.Client, s *corev1.Secret) error {
	err := c.Create(ctx, s)
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("create secret %s/%s: %w", s.Namespace, s.Name, err)
		}
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": s.Labels}, "data": s.Data}) // maps of strings and bytes always marshal
	if err := c.Patch(ctx, s, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("patch secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}
