package snapshot

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
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
	"k8s.io/client-go/tools/events"
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
	// Namespaces are those watched; none: every namespace (as the
	// controller's --namespaces: with the chart's namespaced RBAC, no
	// cluster-wide list is allowed).
	Namespaces []string
	// Log is for what cannot be done.
	Log logr.Logger
	// Recorder says, on the workload, that pods of a pinned revision came
	// up unpinned; CheckAfter is how long after a revision is handed its
	// pods are looked at (0: 10s).
	Recorder   events.EventRecorder
	CheckAfter time.Duration

	// synced: the watches of revisions and snapshots have synced
	// (Exists, PinnedBefore).
	synced atomic.Bool

	mu        sync.Mutex
	done      map[types.UID]bool
	revisions []toolscache.SharedIndexInformer
	// snapshots are the snapshots' metadata, by kind (pin.ConfigMap,
	// pin.Secret), one store per namespace watched.
	snapshots map[string][]toolscache.Store
	q         workqueue.TypedRateLimitingInterface[revision]
	// stored is, per namespace, the bytes of its snapshots (pin.Bytes),
	// and sizes each snapshot's, by UID.
	stored map[string]int64
	sizes  map[types.UID]sized
}

// sized is one snapshot's share of its namespace's bytes.
type sized struct {
	namespace string
	bytes     int64
}

// Stored returns the bytes of the snapshots of namespace ns, as watched
// (the budget of snapshot.Maker).
func (o *Owners) Stored(ns string) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.stored[ns]
}

// count adds (or, gone, removes) a snapshot's bytes to its namespace's.
func (o *Owners) count(obj any, gone bool) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	n, _ := strconv.ParseInt(m.Annotations[pin.Bytes], 10, 64)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stored == nil {
		o.stored, o.sizes = map[string]int64{}, map[types.UID]sized{}
	}
	if was, ok := o.sizes[m.UID]; ok {
		o.stored[was.namespace] -= was.bytes
		delete(o.sizes, m.UID)
	}
	if !gone && n > 0 {
		o.sizes[m.UID] = sized{namespace: m.Namespace, bytes: n}
		o.stored[m.Namespace] += n
	}
	if o.stored[m.Namespace] <= 0 {
		delete(o.stored, m.Namespace)
	}
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
	// pods, for resource "pods", selects the pods of a revision, and
	// workload is its controller (pods to look at: unpinned).
	pods     string
	workload metav1.OwnerReference
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
	o.q = q
	namespaces := o.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	o.snapshots = map[string][]toolscache.Store{}
	var revisions, snapshots []metadatainformer.SharedInformerFactory
	for _, ns := range namespaces {
		rf := metadatainformer.NewFilteredSharedInformerFactory(o.Metadata, 0, ns, func(lo *metav1.ListOptions) {
			lo.LabelSelector = pin.PinnedLabel + "=true"
		})
		sf := metadatainformer.NewFilteredSharedInformerFactory(o.Metadata, 0, ns, func(lo *metav1.ListOptions) {
			lo.LabelSelector = pin.SnapshotLabel + "=true"
		})
		if err := o.watch(q, rf, sf); err != nil {
			return err
		}
		revisions, snapshots = append(revisions, rf), append(snapshots, sf)
	}
	for _, f := range revisions {
		f.Start(ctx.Done())
	}
	for _, f := range revisions {
		f.WaitForCacheSync(ctx.Done())
	}
	for _, f := range snapshots {
		f.Start(ctx.Done())
	}
	go func() {
		for _, f := range snapshots {
			f.WaitForCacheSync(ctx.Done())
		}
		o.synced.Store(ctx.Err() == nil)
	}()
	for range 2 {
		go func() {
			for o.next(ctx, q) {
			}
		}()
	}
	<-ctx.Done()
	return nil
}

// watch registers the informers of one namespace: the revisions (rf) and
// the snapshots (sf).
func (o *Owners) watch(q workqueue.TypedRateLimitingInterface[revision], rf, sf metadatainformer.SharedInformerFactory) error {
	for _, gvr := range revisionKinds {
		inf := rf.ForResource(gvr).Informer()
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
	for _, gvr := range snapshotKinds {
		inf := sf.ForResource(gvr).Informer()
		if err := inf.SetTransform(trimSnapshot); err != nil {
			return err
		}
		kind := map[string]string{"configmaps": pin.ConfigMap, "secrets": pin.Secret}[gvr.Resource]
		o.snapshots[kind] = append(o.snapshots[kind], inf.GetStore())
		_, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { o.count(obj, false); o.enqueueSnapshot(q, gvr.Resource, obj) },
			UpdateFunc: func(_, obj any) { o.count(obj, false); o.enqueueSnapshot(q, gvr.Resource, obj) },
			DeleteFunc: func(obj any) { o.count(obj, true) },
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// cachedSnapshot returns the snapshot ns/name of kind from the snapshots'
// watch, if it holds it.
func (o *Owners) cachedSnapshot(kind, ns, name string) (*metav1.PartialObjectMetadata, bool) {
	for _, st := range o.snapshots[kind] {
		if obj, ok, _ := st.GetByKey(ns + "/" + name); ok {
			return obj.(*metav1.PartialObjectMetadata).DeepCopy(), true
		}
	}
	return nil, false
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
	for _, k := range []string{pin.SnapshotOf, pin.Bytes} {
		if v, ok := m.Annotations[k]; ok {
			if t.Annotations == nil {
				t.Annotations = map[string]string{}
			}
			t.Annotations[k] = v
		}
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
	case "pods":
		return "", o.unpinned(ctx, r)
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
	pins := pin.Parse(template[pin.PinsAnnotation])
	for src, name := range pins {
		if err := o.handOne(ctx, r.namespace, src, name, self, string(owner.UID)); err != nil {
			return "", err
		}
	}
	if sel := podsOf(kind, meta); len(pins) > 0 && sel != "" && o.q != nil {
		o.q.AddAfter(revision{resource: "pods", namespace: r.namespace, name: meta.Name, pods: sel, workload: *owner}, cmp.Or(o.CheckAfter, 10*time.Second))
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
	if cached, ok := o.cachedSnapshot(src.Kind, ns, name); ok {
		snap = cached
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
