// Package slim trims the objects on their way into watcher's informer cache
// down to what watcher reads, so that the cache of a cluster with tens of
// thousands of workloads and Secrets stays small.
//
// What is kept:
//
//	object              kept
//	any (Meta)          name, namespace, uid, resourceVersion, generation,
//	                    deletionTimestamp, the annotations asked for, and
//	                    the labels, as one string in LabelsAnnotation
//	workload (Workload) the above, and in place of its spec the ConfigMaps
//	                    and Secrets its pod template uses, as
//	                    workload.RefsAnnotation, the names of its
//	                    containers (for the env restart strategy), as
//	                    restart.ContainersAnnotation, and whether its pods
//	                    roll only when deleted, as workload.OnDeleteAnnotation,
//	                    a digest of its pod template when a change of it
//	                    rolls every pod, as workload.TemplateAnnotation,
//	                    and, while a rollout of a workload watcher restarted
//	                    (it has guard.StateAnnotation) is not done,
//	                    guard.RollingAnnotation
//
// The transforms give a metav1.PartialObjectMetadata (a typed Deployment
// weighs over a kilobyte in memory even when empty), which the store keeps
// packed (package packed).
//
// Labels are kept for the selectors of ReloadPolicies (package policy),
// which pick workloads, ConfigMaps and Secrets by label (read them with
// Labels); the label selectors of watcher's options are applied by the API
// server.
// Every transform here is idempotent, as client-go requires.
package slim

import (
	"slices"
	"unique"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/workload"
)

// ErrorOperation is the operation label of metrics.Errors for workloads
// whose pod template cannot be read.
const ErrorOperation = "transform"

// Meta returns the parts of m watcher reads, with only the annotations
// named in keep, and its labels in LabelsAnnotation.
func Meta(m metav1.ObjectMeta, keep []string) metav1.ObjectMeta {
	out := metav1.ObjectMeta{
		// Many objects share a namespace: one copy of its name for all.
		Name: m.Name, Namespace: unique.Make(m.Namespace).Value(), UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, DeletionTimestamp: m.DeletionTimestamp,
	}
	if len(m.Labels) > 0 {
		// Room for the few annotations watcher adds (digests, references):
		// maps grow as needed.
		out.Annotations = make(map[string]string, 4)
		out.Annotations[LabelsAnnotation] = EncodeLabels(m.Labels)
	}
	for _, k := range keep {
		if v, ok := m.Annotations[k]; ok {
			if out.Annotations == nil {
				out.Annotations = make(map[string]string, len(keep))
			}
			out.Annotations[k] = shared(v)
		}
	}
	return out
}

// maxShared is the longest annotation value Meta interns: short values
// (the hash key's ID, "true", a strategy) are the same on many objects,
// long ones (records) differ on each.
const maxShared = 16

// shared returns v, interned if it is short.
func shared(v string) string {
	if len(v) > maxShared {
		return v
	}
	return unique.Make(v).Value()
}

// Workload returns a transform that replaces a Deployment, StatefulSet or
// DaemonSet by a PartialObjectMetadata holding its trimmed metadata (Meta,
// with the annotations in keep) and, in workload.RefsAnnotation, the
// references of its pod template and, in restart.ContainersAnnotation, the
// names of its containers. Objects already transformed, and any other
// object, pass through unchanged.
//
// The transform never fails: client-go would drop the object and retry it
// forever. A workload whose pod template cannot be read is kept with no
// references, logged to log and counted in metrics.Errors (operation
// "transform").
func Workload(log logr.Logger, keep ...string) toolscache.TransformFunc {
	keepRefs := append(slices.Clone(keep), workload.RefsAnnotation)
	return func(obj any) (any, error) {
		w, ok := obj.(client.Object)
		if !ok {
			return obj, nil
		}
		if _, done := obj.(*metav1.PartialObjectMetadata); done {
			return obj, nil
		}
		kind, ok := workload.Of(w)
		if !ok {
			return obj, nil
		}
		tmpl := podTemplate(log, kind, w)
		meta := objectMeta(w)
		if tmpl != nil {
			// The annotations that opt in may be on the pod template.
			meta.Annotations = optin.Effective(meta.Annotations, tmpl.Annotations)
		}
		out := &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: kind.APIVersion(), Kind: kind.Name()},
			ObjectMeta: Meta(meta, keepRefs),
		}
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		if kind.Recreate {
			// A Job with a controller is its controller's, never restarted
			// on its own (workload.Kind.Controlled): its controller
			// reference is kept.
			if c := metav1.GetControllerOfNoCopy(w); c != nil {
				out.OwnerReferences = []metav1.OwnerReference{*c}
			}
		}
		var uses []refs.Ref
		if tmpl != nil {
			uses = refs.FromPodSpec(&tmpl.Spec)
			// Most workloads name the same few containers ("app").
			out.Annotations[restart.ContainersAnnotation] = unique.Make(restart.EncodeContainers(restart.ContainersOf(&tmpl.Spec))).Value()
		}
		out.Annotations[workload.RefsAnnotation] = refs.Encode(uses)
		if workload.Delegates(w) {
			out.Annotations[workload.DelegatedAnnotation] = "true"
		}
		if t := workload.Template(w); t != "" {
			out.Annotations[workload.TemplateAnnotation] = t
		}
		if why := workload.OnDelete(w); why != "" {
			out.Annotations[workload.OnDeleteAnnotation] = why
		}
		if _, restarted := w.GetAnnotations()[guard.StateAnnotation]; restarted && guard.Rolling(w) {
			out.Annotations[guard.RollingAnnotation] = "true"
		}
		return out, nil
	}
}

// objectMeta returns the parts of w's metadata that Meta may keep.
func objectMeta(w client.Object) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: w.GetName(), Namespace: w.GetNamespace(), UID: w.GetUID(), ResourceVersion: w.GetResourceVersion(),
		Generation: w.GetGeneration(), DeletionTimestamp: w.GetDeletionTimestamp(), Labels: w.GetLabels(), Annotations: w.GetAnnotations(),
	}
}

// podTemplate returns the pod template of w, a workload of kind, read from
// the object itself: an object from the API server cannot carry the cached
// annotations. Nil if the template cannot be read.
func podTemplate(log logr.Logger, kind workload.Kind, w client.Object) *corev1.PodTemplateSpec {
	tmpl, err := kind.PodTemplate(w)
	if err != nil {
		key := workload.Key{Kind: kind.Name(), Namespace: w.GetNamespace(), Name: w.GetName()}
		log.Error(err, "Cannot read pod template; keeping the workload without references", "workload", key.String())
		metrics.Errors.WithLabelValues(ErrorOperation).Inc()
		return nil
	}
	return tmpl
}
