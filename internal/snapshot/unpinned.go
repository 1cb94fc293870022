package snapshot

import (
	"context"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/pin"
)

// rolloutsHashLabel is the label of Argo Rollouts' ReplicaSets and pods
// that pod-template-hash is of a Deployment's.
const rolloutsHashLabel = "rollouts-pod-template-hash"

// podsOf returns the label selector of the pods of a revision: a
// ReplicaSet's by its pod-template-hash (an Argo Rollout's: its
// rollouts-pod-template-hash); a ControllerRevision's by
// controller-revision-hash, which is its name (StatefulSet) or its hash
// label (DaemonSet).
func podsOf(kind string, meta metav1.ObjectMeta) string {
	if kind == "ReplicaSet" {
		for _, k := range []string{appsv1.DefaultDeploymentUniqueLabelKey, rolloutsHashLabel} {
			if h := meta.Labels[k]; h != "" {
				return k + "=" + h
			}
		}
		return ""
	}
	values := []string{meta.Name}
	if h := meta.Labels[appsv1.ControllerRevisionHashLabelKey]; h != "" && h != meta.Name {
		values = append(values, h)
	}
	return appsv1.ControllerRevisionHashLabelKey + " in (" + strings.Join(values, ",") + ")"
}

// unpinned looks at the pods of the pinned revision r: those the
// admission policy did not mark (pin.Admitted) came up reading the live
// objects. It says so on the workload (Warning PodsUnpinned) and counts
// them. Without the right to list pods it says nothing.
func (o *Owners) unpinned(ctx context.Context, r revision) error {
	var pods metav1.PartialObjectMetadataList
	pods.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "PodList"})
	sel, err := labels.Parse(r.pods)
	if err != nil {
		return nil
	}
	if err := o.Fresh.List(ctx, &pods, client.InNamespace(r.namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		if apierrors.IsForbidden(err) {
			o.Log.V(1).Info("Cannot list pods: pods that came up unpinned are not looked for", "namespace", r.namespace)
			return nil
		}
		return err
	}
	n := 0
	for _, p := range pods.Items {
		if p.Annotations[pin.PinsAnnotation] != "" && p.Annotations[pin.Admitted] != "true" {
			n++
		}
	}
	if n == 0 || o.Recorder == nil {
		return nil
	}
	metrics.UnpinnedPods.Add(float64(n))
	w := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: r.workload.APIVersion, Kind: r.workload.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: r.namespace, Name: r.workload.Name, UID: r.workload.UID}}
	o.Recorder.Eventf(w, nil, corev1.EventTypeWarning, ReasonPodsUnpinned, "Pin",
		"%d pods of revision %s came up unpinned, reading the live ConfigMaps and Secrets: the admission policy that pins pods did not run for them (deleted, or its binding does not match)", n, r.name)
	return nil
}

// ReasonPodsUnpinned says that pods of a pinned revision came up unpinned.
const ReasonPodsUnpinned = "PodsUnpinned"
