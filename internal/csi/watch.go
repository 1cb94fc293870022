package csi

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/metadata"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/object"
)

// Options says what a Watcher watches and whom it tells.
type Options struct {
	// Dynamic reads SecretProviderClassPodStatuses; Meta reads the
	// metadata of pods and ReplicaSets (Owners).
	Dynamic dynamic.Interface
	Meta    metadata.Interface
	// Hasher hashes the versions (VersionHash); required.
	Hasher *hash.Hasher
	// Namespaces to watch; empty: all. IgnoreNamespaces are left out.
	Namespaces       []string
	IgnoreNamespaces []string
	// Enqueue hands a workload whose current versions changed to the
	// controller; it may block until the controller runs (or ctx ends).
	// Set by the controller's Setup.
	Enqueue func(ctx context.Context, workload object.Ref)
	// Log receives the log lines.
	Log logr.Logger
}

// Watcher watches SecretProviderClassPodStatuses while enabled, and tells
// the controller which workloads' mounted versions changed. Enable and
// Disable are called from one goroutine (the controller's optional APIs),
// Mounted from the controller's workers.
type Watcher struct {
	opts   Options
	owners *Owners
	mu     sync.Mutex
	cancel context.CancelFunc
	infs   []toolscache.SharedIndexInformer
	state  *tracker
}

// NewWatcher returns a Watcher; nothing runs until Enable.
func NewWatcher(o Options) *Watcher {
	return &Watcher{opts: o, owners: NewOwners(o.Meta), state: newTracker()}
}

// Name names the kind in logs.
func (w *Watcher) Name() string { return GVK.Kind }

// APIVersion is the group version looked up in discovery.
func (w *Watcher) APIVersion() string { return GVK.GroupVersion().String() }

// Resource is the API resource looked up in discovery.
func (w *Watcher) Resource() string { return GVR.Resource }

// Enabled tells whether the informers run.
func (w *Watcher) Enabled() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cancel != nil
}

// Mounted returns, for each SecretProviderClass the pods of the workload
// mount, the current version hash of each object mounted, keyed by the
// object's id; nil when none is known (see the package comment).
func (w *Watcher) Mounted(workload object.Ref) map[string]map[string]string {
	w.mu.Lock()
	st := w.state
	w.mu.Unlock()
	return st.mounted(workload)
}

// Reports returns the statuses over the limits (MaxObjects) of the pods
// of the workload, one per class for which report is true (the workload
// opted in to it), not reported yet; each is returned once per class and
// shape, for a Warning Event ReasonOverLimit on the workload.
func (w *Watcher) Reports(workload object.Ref, report func(class string) bool) []Report {
	w.mu.Lock()
	st := w.state
	w.mu.Unlock()
	return st.reports(workload, report)
}

// Enable starts one informer per watched namespace and the worker that
// finds each status's workload, until Disable or until ctx is done.
func (w *Watcher) Enable(ctx context.Context) error {
	if w.Enabled() {
		return nil
	}
	namespaces := object.Namespaces(w.opts.Namespaces)
	field := object.NotIn(w.opts.IgnoreNamespaces)
	ctx, cancel := context.WithCancel(ctx)
	st := newTracker()
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 30*time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "csi"})
	var infs []toolscache.SharedIndexInformer
	for _, ns := range namespaces {
		inf := dynamicinformer.NewFilteredDynamicInformer(w.opts.Dynamic, GVR, ns, 0, toolscache.Indexers{},
			func(o *metav1.ListOptions) { o.FieldSelector = field }).Informer()
		err := errors.Join(inf.SetTransform(Transform(w.opts.Hasher)), w.handle(inf, st, queue))
		if err != nil {
			cancel()
			queue.ShutDown()
			return fmt.Errorf("informer of SecretProviderClassPodStatuses: %w", err)
		}
		infs = append(infs, inf)
	}
	for _, inf := range infs {
		go inf.RunWithContext(ctx)
	}
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	go w.work(ctx, infs, st, queue)
	w.mu.Lock()
	w.cancel, w.infs, w.state = cancel, infs, st
	w.mu.Unlock()
	return nil
}

// Disable stops the informers and the worker and forgets the statuses.
func (w *Watcher) Disable() {
	w.mu.Lock()
	cancel := w.cancel
	w.cancel, w.infs, w.state = nil, nil, newTracker()
	w.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// handle observes each status as its event arrives, so that the order of
// the writes is kept, and queues it for the worker.
func (w *Watcher) handle(inf toolscache.SharedIndexInformer, st *tracker, q workqueue.TypedRateLimitingInterface[string]) error {
	add := func(obj any, live bool) {
		s, ok := obj.(*Status)
		if !ok {
			return
		}
		key := s.Namespace + "/" + s.Name
		if st.observe(key, s, live) || !st.filed(key) {
			q.Add(key)
		}
	}
	_, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj any, initial bool) { add(obj, !initial) },
		UpdateFunc: func(_, cur any) { add(cur, true) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if s, ok := obj.(*Status); ok {
				w.owners.Forget(s.Namespace, s.Pod, s.PodUID())
				q.Add(s.Namespace + "/" + s.Name)
			}
		},
	})
	return err
}

// work files each queued status under its pod's workload and hands the
// workloads whose current versions changed to the controller.
func (w *Watcher) work(ctx context.Context, infs []toolscache.SharedIndexInformer, st *tracker, q workqueue.TypedRateLimitingInterface[string]) {
	for {
		key, shutdown := q.Get()
		if shutdown {
			return
		}
		err := w.process(ctx, infs, st, key)
		if err != nil && ctx.Err() == nil {
			metrics.Errors.WithLabelValues("get").Inc()
			w.opts.Log.Error(err, "Cannot find the workload of a SecretProviderClassPodStatus; retrying", "status", key)
			q.AddRateLimited(key)
		} else {
			q.Forget(key)
		}
		q.Done(key)
	}
}

func (w *Watcher) process(ctx context.Context, infs []toolscache.SharedIndexInformer, st *tracker, key string) error {
	s := lookup(infs, key)
	if s == nil {
		st.log(key, Over{}, true)
		st.forget(key)
		return nil
	}
	if st.log(key, s.Over, false) {
		metrics.Errors.WithLabelValues("csi-limit").Inc()
		w.opts.Log.Info("SecretProviderClassPodStatus over the limits", "status", key, "note", s.Over.Note(s.Name, s.Pod, s.Class),
			"objects", s.Over.Objects, "folded", s.Over.Folded, "shortened", s.Over.Shortened, "maxObjects", MaxObjects, "maxIDBytes", MaxIDBytes)
	}
	if s.Over.Refused != "" {
		st.forget(key)
		return nil
	}
	ref, ok, err := w.owners.Of(ctx, s.Namespace, s.Pod, s.PodUID())
	if err != nil {
		return err
	}
	if !ok {
		st.forget(key)
		return nil
	}
	rot, changed := st.file(key, ref)
	untold := st.untold(key)
	if (!changed && !untold) || w.opts.Enqueue == nil {
		return nil
	}
	if changed {
		w.opts.Log.V(1).Info("SecretProviderClass versions changed", "workload", ref.String(), "secretProviderClass", rot.Class, "digest", rot.Digest)
	}
	w.opts.Enqueue(ctx, ref) // untold: the controller reports it (Reports)
	return nil
}

// lookup returns the status key from the informers' caches; nil if none
// holds it.
func lookup(infs []toolscache.SharedIndexInformer, key string) *Status {
	for _, inf := range infs {
		if obj, found, err := inf.GetIndexer().GetByKey(key); err == nil && found {
			if s, ok := obj.(*Status); ok {
				return s
			}
		}
	}
	return nil
}
