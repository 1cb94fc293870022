package controller

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
)

// verify decides a restart again with the changed objects read from the API
// server. The record on a workload may have been written by a replica that
// saw a newer ConfigMap than this replica's store holds: another active
// replica in the redis and none modes, the previous leader at a lease
// handover. Restarting from the store would roll the workload back to older
// content, then forward again. It is called only when the record's version
// does not show the store to be at least as new (plan.StoreMayLag): in the
// usual case, a change seen after the record was written, the restart
// costs the patch alone. The objects read replace the store's in
// in.Configs, for the steps after it (jobFacts).
func (r *Reconciler) verify(ctx context.Context, namespace string, in plan.Input, p plan.Plan) (plan.Plan, error) {
	for _, c := range p.Changes {
		if c.Ref.Kind != refs.ConfigMap && c.Ref.Kind != refs.Secret {
			continue // a SecretProviderClass: no object to read again
		}
		obj := newConfig(c.Ref.Kind)
		err := r.Fresh.Get(ctx, types.NamespacedName{Namespace: namespace, Name: c.Ref.Name}, obj)
		if err != nil && !apierrors.IsNotFound(err) {
			metrics.Errors.WithLabelValues("get").Inc()
			return p, fmt.Errorf("get %s %s/%s: %w", strings.ToLower(string(c.Ref.Kind)), namespace, c.Ref.Name, err)
		}
		cfg := plan.Config{}
		if err == nil {
			d, err := r.Config.Hasher.OfObject(obj)
			if err != nil {
				return p, err
			}
			r.checkAnnotations(ctx, obj)
			cfg = configOf(obj, d)
		}
		in.Configs[c.Ref.ID()] = cfg
	}
	return decide(in), nil
}
