// Package workload knows the kinds of workload watcher restarts. Each kind
// is one value of Kind in Kinds, carrying everything watcher needs of it:
// its GroupVersionKind, where its pod template lives, how to read it from a
// typed or an unstructured object, whether its API may be absent, whether
// changing its template rolls its pods, whether a restart re-creates it
// instead (a Job), and whether watcher evicts its pods to restart it. Every other package asks the
// kind; adding one is one value here plus its test cases.
package workload

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	batchinformers "k8s.io/client-go/informers/batch/v1"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/packed"
	"github.com/watcher-dev/watcher/internal/refs"
)

// Kind describes one workload kind.
type Kind struct {
	// GVK names the kind.
	GVK schema.GroupVersionKind
	// Template is the path of the pod template in an object of the kind.
	Template []string
	// Optional is true for a kind whose API may be absent (a custom
	// resource): it is watched only while the API server serves it.
	Optional bool
	// Resource is the kind's API resource (plural, lower case), for the
	// dynamic informers of kinds with no Go type.
	Resource string
	// TemplateRef is the path of a field that, when set, says the pod
	// template lives in another object (Argo's spec.workloadRef names a
	// Deployment, watched and restarted as itself). An object with it and
	// no template of its own has an empty template: no references, no
	// error.
	TemplateRef []string
	// typed returns the pod template of a typed object of the kind; nil
	// for kinds known only as unstructured objects.
	typed func(client.Object) (*corev1.PodTemplateSpec, bool)
	// onDelete tells why a template change of obj rolls no pod until the
	// pods are deleted ("" when it rolls them); nil: it always rolls them.
	onDelete func(client.Object) string
	// Recreate is true for a kind whose pod template cannot be changed (a
	// Job): a restart deletes the object and creates it again from its
	// spec (see package restart), as Reloader does. Such a kind is
	// restarted only when it opts in, whatever the discovery mode
	// (plan.Input.OptInOnly).
	Recreate bool
	// Evictable is true for a kind whose pods watcher evicts, through the
	// Eviction API, to restart it with the evict strategy (package evict):
	// the restart leaves its template alone. Other kinds restarted with
	// evict are restarted as package restart's Evict says: an Argo Rollout
	// by Argo (spec.restartAt), a CronJob, which has no pods of its own,
	// and a Job, which is re-created, by their template.
	Evictable bool
	// Pinnable is true for a kind whose revisions (ReplicaSets,
	// ControllerRevisions) keep their pod templates, so that its config
	// can be pinned to them (package pin).
	Pinnable bool
	// NewInformer returns a client-go informer of a typed kind.
	NewInformer func(kubernetes.Interface, string, internalinterfaces.InformerOptions) toolscache.SharedIndexInformer
}

// The kinds watcher restarts.
var (
	Deployment = Kind{
		GVK:         appsv1.SchemeGroupVersion.WithKind("Deployment"),
		Template:    []string{"spec", "template"},
		typed:       template(func(o *appsv1.Deployment) *corev1.PodTemplateSpec { return &o.Spec.Template }),
		Pinnable:    true,
		Evictable:   true,
		NewInformer: appsinformers.NewDeploymentInformerWithOptions,
	}
	StatefulSet = Kind{
		GVK:         appsv1.SchemeGroupVersion.WithKind("StatefulSet"),
		Template:    []string{"spec", "template"},
		typed:       template(func(o *appsv1.StatefulSet) *corev1.PodTemplateSpec { return &o.Spec.Template }),
		Pinnable:    true,
		onDelete:    statefulSetOnDelete,
		Evictable:   true,
		NewInformer: appsinformers.NewStatefulSetInformerWithOptions,
	}
	DaemonSet = Kind{
		GVK:         appsv1.SchemeGroupVersion.WithKind("DaemonSet"),
		Template:    []string{"spec", "template"},
		typed:       template(func(o *appsv1.DaemonSet) *corev1.PodTemplateSpec { return &o.Spec.Template }),
		Pinnable:    true,
		onDelete:    daemonSetOnDelete,
		Evictable:   true,
		NewInformer: appsinformers.NewDaemonSetInformerWithOptions,
	}
	// CronJob: a restart changes the template of the Jobs it creates from
	// then on; Jobs already running are left alone.
	CronJob = Kind{
		GVK:         batchv1.SchemeGroupVersion.WithKind("CronJob"),
		Template:    []string{"spec", "jobTemplate", "spec", "template"},
		typed:       template(func(o *batchv1.CronJob) *corev1.PodTemplateSpec { return &o.Spec.JobTemplate.Spec.Template }),
		NewInformer: batchinformers.NewCronJobInformerWithOptions,
	}
	// Job: its template is immutable, so a restart re-creates it (Recreate),
	// finished or not; only a Job that opts in is restarted.
	Job = Kind{
		GVK:         batchv1.SchemeGroupVersion.WithKind("Job"),
		Template:    []string{"spec", "template"},
		typed:       template(func(o *batchv1.Job) *corev1.PodTemplateSpec { return &o.Spec.Template }),
		Recreate:    true,
		NewInformer: batchinformers.NewJobInformerWithOptions,
	}
	// Rollout is Argo Rollouts' Deployment, a custom resource handled as
	// an unstructured object (no Argo Go type). A Rollout with
	// spec.workloadRef and no spec.template of its own takes its template
	// from the Deployment it names, which watcher restarts as a Deployment
	// and Argo follows; such a Rollout has no references of its own.
	Rollout = Kind{
		GVK:         schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Rollout"},
		Template:    []string{"spec", "template"},
		Optional:    true,
		Resource:    "rollouts",
		TemplateRef: []string{"spec", "workloadRef"},
		Pinnable:    true,
	}
)

// Kinds are the workload kinds watcher restarts.
var Kinds = []Kind{Deployment, StatefulSet, DaemonSet, CronJob, Job, Rollout}

// GVR returns the kind's GroupVersionResource.
func (k Kind) GVR() schema.GroupVersionResource { return k.GVK.GroupVersion().WithResource(k.Resource) }

// Name returns the kind's name, e.g. "Deployment".
func (k Kind) Name() string { return k.GVK.Kind }

// APIVersion returns the kind's group and version, e.g. "apps/v1".
func (k Kind) APIVersion() string { return k.GVK.GroupVersion().String() }

// Controlled tells whether obj, of kind k, belongs to its controller: a
// kind that a restart re-creates (a Job) with a controller owner (a
// CronJob, or any other controller). Such a workload is never restarted on
// its own: its controller is (plan.Input.Controlled).
func (k Kind) Controlled(obj client.Object) bool {
	if !k.Recreate {
		return false
	}
	for _, o := range obj.GetOwnerReferences() {
		if o.Controller != nil && *o.Controller {
			return true
		}
	}
	return false
}

// New returns an empty object of the kind: typed when the kind has a Go
// type, else unstructured.
func (k Kind) New() client.Object {
	if obj, err := scheme.Scheme.New(k.GVK); err == nil {
		if o, ok := obj.(client.Object); ok {
			return o
		}
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(k.GVK)
	return u
}

// NewList returns an empty list of the kind.
func (k Kind) NewList() client.ObjectList {
	gvk := k.GVK.GroupVersion().WithKind(k.GVK.Kind + "List")
	if obj, err := scheme.Scheme.New(gvk); err == nil {
		if l, ok := obj.(client.ObjectList); ok {
			return l
		}
	}
	u := &unstructured.UnstructuredList{}
	u.SetGroupVersionKind(gvk)
	return u
}

// PodTemplate returns the pod template of obj, an object of the kind,
// typed or unstructured. The template of a typed object is the object's
// own; that of an unstructured object is a copy.
func (k Kind) PodTemplate(obj client.Object) (*corev1.PodTemplateSpec, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		m, found, err := unstructured.NestedMap(u.Object, k.Template...)
		if err == nil && !found && k.delegates(u) {
			return &corev1.PodTemplateSpec{}, nil
		}
		if err != nil || !found {
			return nil, fmt.Errorf("%s %s/%s has no pod template at %v: %v", k.Name(), obj.GetNamespace(), obj.GetName(), k.Template, err)
		}
		var tmpl corev1.PodTemplateSpec
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &tmpl); err != nil {
			return nil, fmt.Errorf("read pod template of %s %s/%s: %w", k.Name(), obj.GetNamespace(), obj.GetName(), err)
		}
		return &tmpl, nil
	}
	if k.typed != nil {
		if tmpl, ok := k.typed(obj); ok {
			return tmpl, nil
		}
	}
	return nil, fmt.Errorf("%T is not a %s", obj, k.Name())
}

// delegates tells whether u names another object that holds its template.
func (k Kind) delegates(u *unstructured.Unstructured) bool {
	if len(k.TemplateRef) == 0 {
		return false
	}
	v, found, err := unstructured.NestedFieldNoCopy(u.Object, k.TemplateRef...)
	return err == nil && found && v != nil
}

// DelegatedAnnotation marks, on a workload in watcher's store, one whose pod
// template lives in another object (Delegates). Like RefsAnnotation, the key
// is not a valid annotation key.
const DelegatedAnnotation = "watcher.dev/cached/delegated"

// Delegates tells whether obj, a workload of a kind with a TemplateRef,
// names another object that holds its pod template and has none of its own
// (an Argo Rollout with spec.workloadRef): such a workload is restarted
// through that object, never itself, so nothing refers to it.
func Delegates(obj client.Object) bool {
	if _, ok := packed.Annotation(obj, DelegatedAnnotation); ok {
		return true
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return false
	}
	k, ok := Of(u)
	if !ok || !k.delegates(u) {
		return false
	}
	_, found, _ := unstructured.NestedFieldNoCopy(u.Object, k.Template...)
	return !found
}

// template turns a typed accessor into one that takes any object.
func template[T client.Object](get func(T) *corev1.PodTemplateSpec) func(client.Object) (*corev1.PodTemplateSpec, bool) {
	return func(obj client.Object) (*corev1.PodTemplateSpec, bool) {
		o, ok := obj.(T)
		if !ok {
			return nil, false
		}
		return get(o), true
	}
}

// ByName returns the Kind called name.
func ByName(name string) (Kind, bool) {
	for _, k := range Kinds {
		if k.Name() == name {
			return k, true
		}
	}
	return Kind{}, false
}

// ByGVK returns the Kind of gvk.
func ByGVK(gvk schema.GroupVersionKind) (Kind, bool) {
	for _, k := range Kinds {
		if k.GVK == gvk {
			return k, true
		}
	}
	return Kind{}, false
}

// Of returns the Kind of obj: from its GroupVersionKind when it says one
// (unstructured and metadata-only objects), else from its Go type.
func Of(obj client.Object) (Kind, bool) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Empty() {
		var err error
		if gvk, err = apiutil.GVKForObject(obj, scheme.Scheme); err != nil {
			return Kind{}, false
		}
	}
	return ByGVK(gvk)
}

// PodTemplate returns the pod template of a workload of any known kind.
func PodTemplate(obj client.Object) (*corev1.PodTemplateSpec, error) {
	k, ok := Of(obj)
	if !ok {
		return nil, fmt.Errorf("%T is not a workload watcher restarts", obj)
	}
	return k.PodTemplate(obj)
}

// Key identifies one workload: an object.Ref of a workload kind.
type Key = object.Ref

// RefsAnnotation holds, on a workload in watcher's store, its references
// (refs.Encode) in place of its pod template, which the store does not keep.
// Like hash.SumAnnotation, the key is not a valid annotation key, so no
// object from the API server can carry it.
const RefsAnnotation = "watcher.dev/cached/refs"

// Refs returns the ConfigMaps and Secrets a workload uses: from
// RefsAnnotation on a stored workload, from its pod template on one read
// from the API server.
func Refs(obj client.Object) ([]refs.Ref, error) {
	if s, ok := packed.Annotation(obj, RefsAnnotation); ok {
		return refs.Decode(s)
	}
	tmpl, err := PodTemplate(obj)
	if err != nil {
		return nil, err
	}
	return refs.FromPodSpec(&tmpl.Spec), nil
}
