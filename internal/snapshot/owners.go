package snapshot

import (
	"cmp"
	"context"
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
// template is not in the metadata).
//
// The workload owns every snapshot its current template pins until the
// revision made from that template owns it: a restart that reuses a
// snapshot adds the workload to its owners, and an older revision that
// owns it too (it pinned the same content) may be deleted before the new
// one exists (revisionHistoryLimit 0, watcher down during the rollout).
// Per snapshot a workload W owns, when a revision R of W is handed:
//
//	R's pins (pin.PinsAnnotation)                 what happens
//	more than pin.MaxPins entries, or not signed  R is ignored: not pins
//	(Sign set and pin.Signed false)               watcher wrote
//	an entry not named as the snapshot of its     the entry is ignored
//	source (pin.LooksLikeSnapshot)
//	an entry the snapshots' watch does not hold   read from the API server
//	                                              (made just now), else
//	                                              ignored
//	pins the snapshot, R made from W's current    R owns it, W no longer
//	template (same template, hash labels aside)
//	and older than Grace
//	pins the snapshot, R younger than Grace       R owns it, W still; R is
//	                                              handed again after Grace
//	pins the snapshot, R an older revision        R owns it, and W still
//	(or W not readable, or in doubt)
//	does not pin it; W alone owns it for longer   R (current) owns it in
//	than Grace (a restart not written: a          place of W: it goes with R
//	conflict, a paused rollout)
//
// Grace covers a restart in flight: its snapshots are made (or reused,
// W added) before its template is written, so R "current" is trusted only
// once no restart is being written.
//
// A snapshot that a workload owns besides one of its revisions is handed
// again, after Grace, to that revision (the hand-back): W is dropped only
// if that revision is W's current one. A snapshot owned by its workload alone is
// looked at again after Grace: each of W's pinned revisions is handed
// again, and the current one takes it.
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
	// Sign checks the pins of a revision (pin.Signed) and the sizes of the
	// snapshots (pin.SignedBytes) with the installation's key:
	// hash.Hasher.MAC in production; nil: neither is checked.
	Sign pin.Signer
	// Grace is how long a snapshot owned by its workload alone, and not
	// pinned by the workload's current revision, is left before that
	// revision takes it (0: 10 minutes).
	Grace time.Duration
	// Now is the clock; nil: time.Now.
	Now func() time.Time

	mu        sync.Mutex
	done      map[types.UID]bool
	revisions []revisionWatch
	// snapshots are the snapshots' metadata, by kind (pin.ConfigMap,
	// pin.Secret), one store per namespace watched.
	snapshots map[string][]snapStore
	q         workqueue.TypedRateLimitingInterface[revision]
	// stored is, per namespace, the bytes of its snapshots (pin.Bytes,
	// signed: pin.SignedBytes), and sizes each snapshot's, by UID.
	stored map[string]int64
	sizes  map[types.UID]sized
}

// revisionWatch is the revisions' watch of one resource (replicasets,
// controllerrevisions) in one namespace.
type revisionWatch struct {
	resource string
	inf      toolscache.SharedIndexInformer
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

// byUID indexes the revisions by UID, byController by their controller's.
const (
	byUID        = "uid"
	byController = "controller"
)

// revisionUID is the byUID index.
func revisionUID(obj any) ([]string, error) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		return []string{string(m.UID)}, nil
	}
	return nil, nil
}

// controllerUID is the byController index.
func controllerUID(obj any) ([]string, error) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		if c := metav1.GetControllerOf(m); c != nil {
			return []string{string(c.UID)}, nil
		}
	}
	return nil, nil
}

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
	o.mu.Lock()
	o.snapshots = map[string][]snapStore{}
	o.mu.Unlock()
	var revisions, snapshots []metadatainformer.SharedInformerFactory
	for _, ns := range namespaces {
		rf := metadatainformer.NewFilteredSharedInformerFactory(o.Metadata, 0, ns, func(lo *metav1.ListOptions) {
			lo.LabelSelector = pin.PinnedLabel + "=true"
		})
		sf := metadatainformer.NewFilteredSharedInformerFactory(o.Metadata, 0, ns, func(lo *metav1.ListOptions) {
			lo.LabelSelector = pin.SnapshotLabel + "=true"
		})
		if err := o.watch(q, ns, rf, sf); err != nil {
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
	for range 2 {
		go func() {
			for o.next(ctx, q) {
			}
		}()
	}
	<-ctx.Done()
	return nil
}

// watch registers the informers of one namespace ns ("": all): the
// revisions (rf) and the snapshots (sf).
func (o *Owners) watch(q workqueue.TypedRateLimitingInterface[revision], ns string, rf, sf metadatainformer.SharedInformerFactory) error {
	for _, gvr := range revisionKinds {
		inf := rf.ForResource(gvr).Informer()
		if err := inf.SetTransform(trim); err != nil {
			return err
		}
		if err := inf.AddIndexers(toolscache.Indexers{byUID: revisionUID, byController: controllerUID}); err != nil {
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
		o.mu.Lock() // PinnedBefore reads them from the controller's workers
		o.revisions = append(o.revisions, revisionWatch{resource: gvr.Resource, inf: inf})
		o.mu.Unlock()
	}
	for _, gvr := range snapshotKinds {
		inf := sf.ForResource(gvr).Informer()
		if err := inf.SetTransform(trimSnapshot); err != nil {
			return err
		}
		if err := inf.AddIndexers(toolscache.Indexers{byOwner: ownerUIDs}); err != nil {
			return err
		}
		kind := map[string]string{"configmaps": pin.ConfigMap, "secrets": pin.Secret}[gvr.Resource]
		o.mu.Lock()
		o.snapshots[kind] = append(o.snapshots[kind], snapStore{namespace: ns, store: inf.GetIndexer(), synced: inf.HasSynced})
		o.mu.Unlock()
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

// trimSnapshot keeps of a snapshot what Owners reads: trim's, its labels,
// its creation time, its pin.SnapshotOf and its size (pin.Bytes, signed).
func trimSnapshot(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	out, _ := trim(obj)
	t := out.(*metav1.PartialObjectMetadata)
	t.Labels, t.CreationTimestamp = m.Labels, m.CreationTimestamp
	for _, k := range []string{pin.SnapshotOf, pin.Bytes, pin.BytesSignature} {
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

// enqueueSnapshot queues, after Grace, a snapshot that a workload owns
// besides one of its revisions (the restart that reused it writes its
// template meanwhile, or never), and one its workload owns alone (made
// Grace ago).
func (o *Owners) enqueueSnapshot(q workqueue.TypedRateLimitingInterface[revision], resource string, obj any) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	switch {
	case !ok:
	case len(o.handedBack(m.OwnerReferences)) < len(m.OwnerReferences):
		q.AddAfter(revision{resource: resource, namespace: m.Namespace, name: m.Name}, cmp.Or(o.Grace, 10*time.Minute))
	case alone(m.OwnerReferences) != nil:
		q.AddAfter(revision{resource: resource, namespace: m.Namespace, name: m.Name}, o.left(m.CreationTimestamp))
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
		for _, rw := range o.revisions {
			objs, _ := rw.inf.GetIndexer().ByIndex(byUID, string(r.UID))
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
