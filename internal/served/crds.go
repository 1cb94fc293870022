package served

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata/metadatainformer"
	toolscache "k8s.io/client-go/tools/cache"
)

// syncTimeout bounds the wait for the CRD informer's first list; past
// it, the Watcher falls back to asking discovery every Fallback.
const syncTimeout = 30 * time.Second

// probeTries is how many times CRDs are listed before the Watcher falls
// back, unless the list is forbidden or not found.
const probeTries = 3

// CRDs is the resource of CustomResourceDefinitions.
var CRDs = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// watch starts the CRD informer and returns its store once it has
// synced, or an error if CRDs cannot be listed.
func (w *Watcher) watch(ctx context.Context) (toolscache.Store, error) {
	// One cheap list first: a forbidden list would otherwise be retried
	// by the informer forever, in silence. Another failure (an API server
	// not answering yet) is tried again twice.
	for try := 1; ; try++ {
		_, err := w.crds.Resource(CRDs).List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			break
		}
		if try == probeTries || apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || ctx.Err() != nil {
			return nil, fmt.Errorf("list %s: %w", CRDs.GroupResource(), err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(try) * time.Second):
		}
	}
	inf := metadatainformer.NewFilteredMetadataInformer(w.crds, CRDs, metav1.NamespaceAll, 0, toolscache.Indexers{}, nil).Informer()
	if err := inf.SetTransform(slim); err != nil {
		return nil, fmt.Errorf("slim %s: %w", CRDs.GroupResource(), err)
	}
	// The CRDs of the initial list are looked at by the initial checks.
	_, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if !initial {
				w.changed(obj)
			}
		},
		UpdateFunc: func(old, obj any) {
			if metaOf(old).GetResourceVersion() != metaOf(obj).GetResourceVersion() {
				w.changed(obj)
			}
		},
		DeleteFunc: w.changed,
	})
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", CRDs.GroupResource(), err)
	}
	// The informer runs until ctx is done, or stops here if it cannot
	// list in time.
	stop := make(chan struct{})
	var once sync.Once
	stopInformer := func() { once.Do(func() { close(stop) }) }
	context.AfterFunc(ctx, stopInformer)
	go inf.Run(stop)
	syncCtx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	if !toolscache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
		stopInformer()
		return nil, fmt.Errorf("list %s: not synced after %s", CRDs.GroupResource(), syncTimeout)
	}
	return inf.GetStore(), nil
}

// poll queues a check of every followed API every interval.
func (w *Watcher) poll(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.mu.Lock()
		for name := range w.follows {
			w.queue.Add(name)
		}
		w.mu.Unlock()
	}
}

// changed queues a check of the API whose CRD obj is, if it is followed,
// with a fresh backoff.
func (w *Watcher) changed(obj any) {
	name := metaOf(obj).GetName()
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.follows[name]; !ok {
		return
	}
	w.queue.Forget(name)
	w.queue.Add(name)
}

// defined tells whether the CRD name exists and is not being deleted: the
// API should then be served, soon if not yet.
func defined(store toolscache.Store, name string) bool {
	obj, ok, err := store.GetByKey(name)
	return err == nil && ok && metaOf(obj).GetDeletionTimestamp() == nil
}

// slim keeps of a CRD what the Watcher reads: its name, resource version
// and deletion timestamp (a CRD's annotations may hold its whole schema,
// as kubectl's last-applied configuration).
func slim(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion, DeletionTimestamp: m.DeletionTimestamp,
	}}, nil
}

// metaOf returns the object metadata of an informer's object, or of the
// last state of a deleted one.
func metaOf(obj any) metav1.Object {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if m, ok := obj.(metav1.Object); ok {
		return m
	}
	return &metav1.ObjectMeta{}
}
