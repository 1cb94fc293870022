package csi

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"

	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/workload"
)

// MaxOwners bounds the pods whose workload Owners remembers.
const MaxOwners = 10000

var (
	podsGVR        = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	replicaSetsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
)

// Owners finds the workload of a pod from its controller reference:
//
//	pod's controller        workload
//	ReplicaSet              the ReplicaSet's controller (a Deployment, an
//	                        Argo Rollout), read with a GET of its metadata
//	a kind watcher restarts that kind (StatefulSet, DaemonSet...)
//	anything else, none     none
//
// It reads pods and ReplicaSets with one GET of their metadata each, never
// a LIST or a watch, and remembers the answer per pod (by UID, which a
// recreated pod of the same name does not share), for at most MaxOwners
// pods.
type Owners struct {
	meta metadata.Interface
	mu   sync.Mutex
	pods map[string]owner
}

type owner struct {
	ref object.Ref
	ok  bool
}

// NewOwners returns Owners reading through meta.
func NewOwners(meta metadata.Interface) *Owners {
	return &Owners{meta: meta, pods: map[string]owner{}}
}

// Of returns the workload of the pod namespace/name whose UID is uid ("":
// unknown, the pod is read every time); ok is false when the pod is gone
// or belongs to no workload watcher restarts.
func (o *Owners) Of(ctx context.Context, namespace, name, uid string) (object.Ref, bool, error) {
	id := namespace + "/" + name + "/" + uid
	if uid != "" {
		o.mu.Lock()
		w, found := o.pods[id]
		o.mu.Unlock()
		if found {
			return w.ref, w.ok, nil
		}
	}
	pod, err := o.meta.Resource(podsGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return object.Ref{}, false, nil
	}
	if err != nil {
		return object.Ref{}, false, fmt.Errorf("get pod %s/%s: %w", namespace, name, err)
	}
	if uid != "" && string(pod.UID) != uid {
		return object.Ref{}, false, nil // the status's pod is gone; another took its name
	}
	ref, ok, err := o.workloadOf(ctx, namespace, metav1.GetControllerOf(pod))
	if err != nil {
		return object.Ref{}, false, err
	}
	o.mu.Lock()
	if len(o.pods) >= MaxOwners {
		for k := range o.pods { // forget one, any
			delete(o.pods, k)
			break
		}
	}
	o.pods[namespace+"/"+name+"/"+string(pod.UID)] = owner{ref, ok}
	o.mu.Unlock()
	return ref, ok, nil
}

// Forget forgets the pod namespace/name whose UID is uid.
func (o *Owners) Forget(namespace, name, uid string) {
	o.mu.Lock()
	delete(o.pods, namespace+"/"+name+"/"+uid)
	o.mu.Unlock()
}

// workloadOf returns the workload that c, a pod's controller, is or
// belongs to (see Owners).
func (o *Owners) workloadOf(ctx context.Context, namespace string, c *metav1.OwnerReference) (object.Ref, bool, error) {
	if c == nil {
		return object.Ref{}, false, nil
	}
	gv, err := schema.ParseGroupVersion(c.APIVersion)
	if err != nil {
		return object.Ref{}, false, nil
	}
	if gv.Group == "apps" && c.Kind == "ReplicaSet" {
		rs, err := o.meta.Resource(replicaSetsGVR).Namespace(namespace).Get(ctx, c.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return object.Ref{}, false, nil
		}
		if err != nil {
			return object.Ref{}, false, fmt.Errorf("get replicaset %s/%s: %w", namespace, c.Name, err)
		}
		if c = metav1.GetControllerOf(rs); c == nil {
			return object.Ref{}, false, nil
		}
		if gv, err = schema.ParseGroupVersion(c.APIVersion); err != nil {
			return object.Ref{}, false, nil
		}
	}
	kind, ok := workload.ByGVK(gv.WithKind(c.Kind))
	if !ok {
		return object.Ref{}, false, nil
	}
	return object.Ref{Kind: kind.Name(), Namespace: namespace, Name: c.Name}, true, nil
}
