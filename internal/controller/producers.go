package controller

import (
	"context"

	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/refs"
)

// Produced enqueues the workloads that read src (package producer's
// Options.Enqueue): see producer.Wakes.
func (r *Reconciler) Produced(ctx context.Context, src object.Ref) { r.producerWakes.Enqueue(ctx, src) }

// usersOf returns the Workload requests of the workloads that read src,
// found through the store's index.
func (r *Reconciler) usersOf(src object.Ref) ([]Request, error) {
	keys, err := r.Store.UsersOf(refs.Kind(src.Kind), src.Namespace, src.Name)
	users := make([]Request, 0, len(keys))
	for _, k := range keys {
		users = append(users, Workload{k})
	}
	return users, err
}
