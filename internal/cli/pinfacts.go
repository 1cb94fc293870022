package cli

// What explain and stale know of pinning that only a read of the cluster
// tells: whether the installation pins, which snapshots a template pins
// that are gone, and whether the workload was pinned before. They are
// handed to explain (explain.Settings.Pinning, explain.Workload), which
// runs the controller's chain (package verdict) on them.

import (
	"context"
	"errors"
	"fmt"
	"io"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/explain"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/snapshot"
	"github.com/watcher-dev/watcher/internal/workload"
)

// pinningPolicy is the name of the admission policy that pins pods, the
// controller's --pinning-policy default: the published settings do not
// carry --pinning nor --pinning-policy.
const pinningPolicy = "watcher-pins"

// pinning reports whether the installation pins, as the controller
// checks it (snapshot.Maker.Installed: the admission policy and its
// binding exist). An answer other than "not there" (no right to read
// them) is said on warn, and taken as off.
func (r *reader) pinning(ctx context.Context, warn io.Writer, prog string) bool {
	m := &snapshot.Maker{Fresh: r.c, Policy: pinningPolicy}
	err := m.Installed(ctx)
	if err != nil && !errors.Is(err, snapshot.ErrOff) {
		fmt.Fprintf(warn, "%s: whether pinning is installed cannot be told (taken as off): %v\n", prog, err)
	}
	return err == nil
}

// pinFacts reads into w what the chain needs of its workload's pins: the
// snapshots its pod template pins that do not exist, and, for a
// template with neither pins nor revision label, whether a revision of
// it is pinned (its ReplicaSets or ControllerRevisions labelled
// pin.PinnedLabel). An error of a read is returned.
func (r *reader) pinFacts(ctx context.Context, w *explain.Workload) error {
	obj := w.Object
	kind, ok := workload.Of(obj)
	if !ok || !kind.Pinnable {
		return nil
	}
	ann := optin.Of(obj)
	pins := optin.TemplatePins(ann)
	for _, src := range pin.Sorted(pins) {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(map[string]string{pin.ConfigMap: "ConfigMap", pin.Secret: "Secret"}[src.Kind]))
		err := r.c.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: pins[src]}, m)
		switch {
		case apierrors.IsNotFound(err):
			w.Missing = append(w.Missing, src.Kind+" "+pins[src])
		case err != nil:
			return fmt.Errorf("get snapshot %s/%s: %w", obj.GetNamespace(), pins[src], err)
		}
	}
	if len(pins) > 0 || obj.GetLabels()[pin.RevisionLabel] != "" {
		return nil
	}
	var err error
	w.PinnedBefore, err = r.pinnedBefore(ctx, kind, obj)
	return err
}

// pinnedBefore reports whether a revision of obj is labelled
// pin.PinnedLabel, as snapshot.Owners.PinnedBefore sees it.
func (r *reader) pinnedBefore(ctx context.Context, kind workload.Kind, obj client.Object) (bool, error) {
	opts := []client.ListOption{client.InNamespace(obj.GetNamespace()), client.MatchingLabels{pin.PinnedLabel: "true"}}
	var items []metav1.Object
	switch kind.Name() {
	case workload.Deployment.Name(), workload.Rollout.Name():
		var list appsv1.ReplicaSetList
		if err := r.c.List(ctx, &list, opts...); err != nil {
			return false, fmt.Errorf("list replicasets of %s: %w", obj.GetNamespace(), err)
		}
		for i := range list.Items {
			items = append(items, &list.Items[i])
		}
	default:
		var list appsv1.ControllerRevisionList
		if err := r.c.List(ctx, &list, opts...); err != nil {
			return false, fmt.Errorf("list controllerrevisions of %s: %w", obj.GetNamespace(), err)
		}
		for i := range list.Items {
			items = append(items, &list.Items[i])
		}
	}
	for _, it := range items {
		if controlledBy(it, obj) {
			return true, nil
		}
	}
	return false, nil
}
