package sealed

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"

	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/lock"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/object"
)

// Event reasons, one per reported event.
const (
	ReasonCreated = "SealedSecretCreated"
	ReasonUpdated = "SealedSecretUpdated"
	ReasonDeleted = "SealedSecretDeleted"
)

// Options says what a Watcher watches and where it reports.
type Options struct {
	// Dynamic reads SealedSecrets.
	Dynamic dynamic.Interface
	// Namespaces to watch; empty: all. IgnoreNamespaces are left out
	// (watcher's ignored Secret namespaces).
	Namespaces       []string
	IgnoreNamespaces []string
	// Hasher hashes the ciphertexts.
	Hasher *hash.Hasher
	// Recorder emits the Events on SealedSecrets.
	Recorder events.EventRecorder
	// Log receives the log lines.
	Log logr.Logger
	// Claim tells whether this replica reports the change named id: the
	// leader, or the replica that takes the change's lock, so that a change
	// is reported once however many replicas run. Nil: always.
	Claim func(ctx context.Context, id string) bool
}

// Watcher watches SealedSecrets while enabled and reports their changes.
// Enable and Disable are called from one goroutine (see the controller's
// optional kinds), the handlers from the informers'.
type Watcher struct {
	opts   Options
	mu     sync.Mutex
	cancel context.CancelFunc
	infs   []toolscache.SharedIndexInformer
}

// NewWatcher returns a Watcher; nothing runs until Enable.
func NewWatcher(o Options) *Watcher { return &Watcher{opts: o} }

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

// Enable starts one informer per watched namespace, until Disable or until
// ctx is done. The SealedSecrets that exist when it starts are not
// reported: only what changes from then on.
func (w *Watcher) Enable(ctx context.Context) error {
	if w.Enabled() {
		return nil
	}
	namespaces := object.Namespaces(w.opts.Namespaces)
	field := object.NotIn(w.opts.IgnoreNamespaces)
	ctx, cancel := context.WithCancel(ctx)
	var infs []toolscache.SharedIndexInformer
	for _, ns := range namespaces {
		inf := dynamicinformer.NewFilteredDynamicInformer(w.opts.Dynamic, GVR, ns, 0, toolscache.Indexers{},
			func(o *metav1.ListOptions) { o.FieldSelector = field }).Informer()
		err := errors.Join(inf.SetTransform(Transform(w.opts.Hasher)), w.handle(ctx, inf))
		if err != nil {
			cancel()
			return fmt.Errorf("informer of SealedSecrets: %w", err)
		}
		infs = append(infs, inf)
	}
	for _, inf := range infs {
		go inf.RunWithContext(ctx)
	}
	w.mu.Lock()
	w.cancel, w.infs = cancel, infs
	w.mu.Unlock()
	return nil
}

// Disable stops the informers and forgets the SealedSecrets.
func (w *Watcher) Disable() {
	w.mu.Lock()
	cancel := w.cancel
	w.cancel, w.infs = nil, nil
	w.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (w *Watcher) handle(ctx context.Context, inf toolscache.SharedIndexInformer) error {
	_, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if !initial {
				w.report(ctx, nil, obj)
			}
		},
		UpdateFunc: func(old, cur any) { w.report(ctx, old, cur) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			w.report(ctx, obj, nil)
		},
	})
	return err
}

// report reports the change from old to cur (either nil: created or
// deleted), if it changed a key and this replica claims it.
func (w *Watcher) report(ctx context.Context, old, cur any) {
	oldKeys, errOld := keysOf(old)
	curKeys, errCur := keysOf(cur)
	if err := errors.Join(errOld, errCur); err != nil {
		w.opts.Log.Error(err, "Cached SealedSecret has no digest")
		metrics.Errors.WithLabelValues("digest").Inc()
		return
	}
	event, keys := Change(oldKeys, curKeys)
	if event == "" {
		return
	}
	// The change is named as the controller names a change of a ConfigMap
	// (package lock): by its object's UID and version, or as a deletion.
	var obj *metav1.PartialObjectMetadata
	var id string
	if event == Deleted {
		obj = old.(*metav1.PartialObjectMetadata)
		id = lock.DeletedID(GVK.Kind, obj.Namespace, obj.Name, obj.UID)
	} else {
		obj = cur.(*metav1.PartialObjectMetadata)
		id = lock.ID(GVK.Kind, obj)
	}
	if w.opts.Claim != nil && !w.opts.Claim(ctx, id) {
		return
	}
	name := obj.Namespace + "/" + obj.Name
	list := strings.Join(keys, ",")
	if len(keys) == 0 {
		list = "none"
	}
	metrics.SealedSecretChanges.WithLabelValues(event).Inc()
	w.opts.Log.Info("SealedSecret changed", "sealedSecret", name, "event", event, "keys", keys)
	if w.opts.Recorder != nil {
		reason := map[string]string{Created: ReasonCreated, Updated: ReasonUpdated, Deleted: ReasonDeleted}[event]
		w.opts.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, reason, "Seal", "SealedSecret %s, keys: %s", event, strings.ReplaceAll(list, ",", ", "))
	}
}

// keysOf returns the key hashes of a transformed SealedSecret; nil for nil.
func keysOf(obj any) (map[string]string, error) {
	if obj == nil {
		return nil, nil
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return nil, fmt.Errorf("cache held %T, not a PartialObjectMetadata", obj)
	}
	d, err := hash.FromObject(m)
	if err != nil {
		return nil, err
	}
	return d.Keys, nil
}
