package snapshot

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/pin"
)

// Owners hands the snapshots a revision pins to that revision: each
// ReplicaSet (of a Deployment or an Argo Rollout) and ControllerRevision
// (of a StatefulSet or DaemonSet) made from a pinned template
// (pin.PinnedLabel) becomes an owner of each snapshot its template's pins
// name, in place of its workload. Kubernetes' garbage collector then
// removes a snapshot with the last revision that pins it (the workload's
// revisionHistoryLimit bounds them).
//
// It watches only the revisions labelled pin.PinnedLabel and the snapshots
// (pin.SnapshotLabel), as metadata, and reads each revision once (its
// template is not in the metadata). A snapshot that a workload owns
// besides one of its revisions (a restart that reused it) is handed to
// the revision again: the workload owns a snapshot only until one of its
// revisions does.
type Owners struct {
	// Client patches snapshots; Fresh reads revisions and snapshots.
	Client client.Client
	Fresh  client.Reader
	// Metadata lists and watches the revisions.
	Metadata metadata.Interface
	// Log is for what cannot be done.
	Log logr.Logger

	mu        sync.Mutex
	done      map[types.UID]bool
	revisions []toolscache.SharedIndexInformer
	// snapshots are the snapshots' metadata, by kind (pin.ConfigMap,
	// pin.Secret).
	snapshots map[string]toolscache.Store
}

// revisionKinds are the revisions that can pin.
var revisionKinds = []schema.GroupVersionResource{
	appsv1.SchemeGroupVersion.WithResource("replicasets"),
	appsv1.SchemeGroupVersion.WithResource("controllerrevisions"),
}

// snapshotKinds are the kinds of snapshots.
var snapshotKinds = []schema.GroupVersionResource{
	{Version: "v1", Resource: "configmaps"},
	{Version: "v1", Resource: "secrets"},
}

// byUID indexes the revisions by UID.
const byUID = "uid"

// revision names one revision, or one snapshot (resource configmaps or
// secrets).
type revision struct {
	resource  string
	namespace string
	name      string
	// uid is a revision's, as last seen (a revision queued again by an
	// update while handed is not read again).
	uid types.UID
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: any
// replica may hand snapshots (each patch is conditional and idempotent).
func (o *Owners) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable: it watches the pinned revisions and
// hands their snapshots until ctx ends.
func (o *Owners) Start(ctx context.Context) error {
	o.done = map[types.UID]bool{}
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[revision](100*time.Millisecond, time.Minute))
	defer q.ShutDown()
	revisions := metadatainformer.NewFilteredSharedInformerFactory(o.Metadata, 0, metav1.NamespaceAll, func(lo *metav1.ListOptions) {
		lo.LabelSelector = pin.PinnedLabel + "=true"
	})
	for _, gvr := range revisionKinds {
		inf := revisions.ForResource(gvr).Informer()
		if err := inf.SetTransform(trim); err != nil {
			return err
		}
		if err := inf.AddIndexers(toolscache.Indexers{byUID: func(obj any) ([]string, error) {
			return []string{string(obj.(*metav1.PartialObjectMetadata).UID)}, nil
		}}); err != nil {
			return err
		}
		_, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { o.enqueue(q, gvr.Resource, obj) },
			UpdateFunc: func(_, obj any) { o.enqueue(q, gvr.Resource, obj) },
			DeleteFunc: func(obj any) { o.forget(obj) },
		})
		if err != nil {
			return err
		}
		o.revisions = append(o.revisions, inf)
	}
	snapshots := metadatainformer.NewFilteredSharedInformerFactory(o.Metadata, 0, metav1.NamespaceAll, func(lo *metav1.ListOptions) {
		lo.LabelSelector = pin.SnapshotLabel + "=true"
	})
	o.snapshots = map[string]toolscache.Store{}
	for _, gvr := range snapshotKinds {
		inf := snapshots.ForResource(gvr).Informer()
		if err := inf.SetTransform(trimSnapshot); err != nil {
			return err
		}
		o.snapshots[map[string]string{"configmaps": pin.ConfigMap, "secrets": pin.Secret}[gvr.Resource]] = inf.GetStore()
		_, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { o.enqueueSnapshot(q, gvr.Resource, obj) },
			UpdateFunc: func(_, obj any) { o.enqueueSnapshot(q, gvr.Resource, obj) },
		})
		if err != nil {
			return err
		}
	}
	revisions.Start(ctx.Done())
	revisions.WaitForCacheSync(ctx.Done())
	snapshots.Start(ctx.Done())
	for range 2 {
		go func() {
			for o.next(ctx, q) {
			}
		}()
	}
	<-ctx.Done()
	return nil
}

// trim keeps of a revision only what Owners reads.
func trim(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Namespace: m.Namespace, Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion,
		OwnerReferences: m.OwnerReferences}}, nil
}

// trimSnapshot keeps of a snapshot what Owners reads: trim's, its labels
// and its pin.SnapshotOf.
func trimSnapshot(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	out, _ := trim(obj)
	t := out.(*metav1.PartialObjectMetadata)
	t.Labels = m.Labels
	if v, ok := m.Annotations[pin.SnapshotOf]; ok {
		t.Annotations = map[string]string{pin.SnapshotOf: v}
	}
	return t, nil
}

// enqueue queues a revision not handled yet.
func (o *Owners) enqueue(q workqueue.TypedRateLimitingInterface[revision], resource string, obj any) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	o.mu.Lock()
	done := o.done[m.UID]
	o.mu.Unlock()
	if !done {
		q.Add(revision{resource: resource, namespace: m.Namespace, name: m.Name, uid: m.UID})
	}
}

// enqueueSnapshot queues a snapshot that a workload owns besides one of
// its revisions.
func (o *Owners) enqueueSnapshot(q workqueue.TypedRateLimitingInterface[revision], resource string, obj any) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if ok && len(o.handedBack(m.OwnerReferences)) < len(m.OwnerReferences) {
		q.Add(revision{resource: resource, namespace: m.Namespace, name: m.Name})
	}
}

// handedBack returns owners without the workloads of which another owner
// is a revision (as the revisions' cache knows them).
func (o *Owners) handedBack(owners []metav1.OwnerReference) []metav1.OwnerReference {
	revisionOf := map[types.UID]bool{}
	for _, r := range owners {
		if r.Kind != "ReplicaSet" && r.Kind != "ControllerRevision" {
			continue
		}
		for _, inf := range o.revisions {
			objs, _ := inf.GetIndexer().ByIndex(byUID, string(r.UID))
			for _, obj := range objs {
				if c := metav1.GetControllerOf(obj.(*metav1.PartialObjectMetadata)); c != nil {
					revisionOf[c.UID] = true
				}
			}
		}
	}
	return slices.DeleteFunc(slices.Clone(owners), func(r metav1.OwnerReference) bool { return revisionOf[r.UID] })
}

// forget drops a deleted revision from those handled.
func (o *Owners) forget(obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		o.mu.Lock()
		delete(o.done, m.UID)
		o.mu.Unlock()
	}
}

// next handles one queued revision; false when the queue shuts down.
func (o *Owners) next(ctx context.Context, q workqueue.TypedRateLimitingInterface[revision]) bool {
	r, stop := q.Get()
	if stop {
		return false
	}
	defer q.Done(r)
	o.mu.Lock()
	done := r.uid != "" && o.done[r.uid]
	o.mu.Unlock()
	if done {
		q.Forget(r)
		return true
	}
	uid, err := o.hand(ctx, r)
	if apierrors.IsConflict(err) { // read before a change: read again
		q.AddRateLimited(r)
		return true
	}
	if err != nil {
		o.Log.Error(err, "Cannot hand snapshots to their revision; retrying", "revision", r.namespace+"/"+r.name, "resource", r.resource)
		q.AddRateLimited(r)
		return true
	}
	q.Forget(r)
	if uid != "" {
		o.mu.Lock()
		o.done[uid] = true
		o.mu.Unlock()
	}
	return true
}

// hand makes the revision r an owner of each snapshot it pins, in place of
// its workload. It returns r's UID once done ("" when r is gone).
func (o *Owners) hand(ctx context.Context, r revision) (types.UID, error) {
	key := types.NamespacedName{Namespace: r.namespace, Name: r.name}
	var (
		meta     metav1.ObjectMeta
		template map[string]string
		kind     string
	)
	switch r.resource {
	case "configmaps", "secrets":
		return "", o.handBack(ctx, r)
	case "replicasets":
		var rs appsv1.ReplicaSet
		if err := o.Fresh.Get(ctx, key, &rs); err != nil {
			return "", client.IgnoreNotFound(err)
		}
		meta, template, kind = rs.ObjectMeta, rs.Spec.Template.Annotations, "ReplicaSet"
	default:
		var cr appsv1.ControllerRevision
		if err := o.Fresh.Get(ctx, key, &cr); err != nil {
			return "", client.IgnoreNotFound(err)
		}
		var data struct {
			Spec struct {
				Template struct {
					Metadata metav1.ObjectMeta `json:"metadata"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(cr.Data.Raw, &data); err != nil {
			return cr.UID, nil // not a template revision: nothing to hand
		}
		meta, template, kind = cr.ObjectMeta, data.Spec.Template.Metadata.Annotations, "ControllerRevision"
	}
	owner := metav1.GetControllerOf(&meta)
	if owner == nil {
		return meta.UID, nil
	}
	self := metav1.OwnerReference{APIVersion: "apps/v1", Kind: kind, Name: meta.Name, UID: meta.UID}
	for src, name := range pin.Parse(template[pin.PinsAnnotation]) {
		if err := o.handOne(ctx, r.namespace, src, name, self, string(owner.UID)); err != nil {
			return "", err
		}
	}
	return meta.UID, nil
}

// handBack drops from the owners of the snapshot r the workloads one of
// whose revisions owns it.
func (o *Owners) handBack(ctx context.Context, r revision) error {
	snap := &metav1.PartialObjectMetadata{}
	snap.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: map[string]string{"configmaps": "ConfigMap", "secrets": "Secret"}[r.resource]})
	if err := o.Fresh.Get(ctx, types.NamespacedName{Namespace: r.namespace, Name: r.name}, snap); err != nil {
		return client.IgnoreNotFound(err)
	}
	if snap.Labels[pin.SnapshotLabel] != "true" {
		return nil
	}
	owners := o.handedBack(snap.OwnerReferences)
	if len(owners) == len(snap.OwnerReferences) || len(owners) == 0 {
		return nil
	}
	if err := PatchOwners(ctx, o.Client, snap, owners); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("hand snapshot %s/%s back to its revisions: %w", r.namespace, r.name, err)
	}
	return nil
}

// handOne makes rev an owner of the snapshot ns/name of src in place of the
// workload whose UID is workload.
func (o *Owners) handOne(ctx context.Context, ns string, src pin.Source, name string, rev metav1.OwnerReference, workload string) error {
	// The snapshots' cache, else (just made) the API server: the patch is
	// conditioned on the version read either way.
	gvk := schema.GroupVersionKind{Version: "v1", Kind: map[string]string{pin.ConfigMap: "ConfigMap", pin.Secret: "Secret"}[src.Kind]}
	snap := &metav1.PartialObjectMetadata{}
	snap.SetGroupVersionKind(gvk)
	if cached, ok, _ := o.snapshots[src.Kind].GetByKey(ns + "/" + name); ok {
		snap = cached.(*metav1.PartialObjectMetadata).DeepCopy()
		snap.SetGroupVersionKind(gvk)
	} else if err := o.Fresh.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, snap); err != nil {
		return client.IgnoreNotFound(err)
	}
	if snap.Labels[pin.SnapshotLabel] != "true" || snap.Annotations[pin.SnapshotOf] != src.String() {
		return nil // not a snapshot of watcher's: never touched
	}
	owners, changed := pin.Handed(snap.OwnerReferences, rev, workload)
	if !changed {
		return nil
	}
	if err := PatchOwners(ctx, o.Client, snap, owners); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("hand snapshot %s/%s to %s %s: %w", ns, name, rev.Kind, rev.Name, err)
	}
	return nil
}
