package producer

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/served"
)

// targetIndex indexes the trimmed producers by "namespace/name" of the
// Secret they produce.
const targetIndex = "target"

// api follows one known kind at one version while its CRD is served: one
// informer per watched namespace. It implements served.Optional; Enable
// and Disable are called from one goroutine (served.Kinds), Check and the
// handlers from others.
type api struct {
	f    *Follower
	kind *kind

	mu     sync.Mutex
	parent context.Context // Enable's, for the Enqueue of Disable
	cancel context.CancelFunc
	infs   []toolscache.SharedIndexInformer
}

// Name names the API in logs: "ExternalSecret v1".
func (a *api) Name() string { return a.kind.gvk.Kind + " " + a.kind.gvk.Version }

// APIVersion is the group version looked up in discovery.
func (a *api) APIVersion() string { return a.kind.gvk.GroupVersion().String() }

// Resource is the API resource looked up in discovery.
func (a *api) Resource() string { return a.kind.resource }

// Enabled tells whether the informers run.
func (a *api) Enabled() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cancel != nil
}

// Enable starts the informers, until Disable or until ctx is done.
func (a *api) Enable(ctx context.Context) error {
	if a.Enabled() {
		return nil
	}
	o := a.f.opts
	parent := ctx
	gvr := a.kind.gvk.GroupVersion().WithResource(a.kind.resource)
	field := object.NotIn(o.IgnoreNamespaces)
	ctx, cancel := context.WithCancel(ctx)
	var infs []toolscache.SharedIndexInformer
	for _, ns := range object.Namespaces(o.Namespaces) {
		inf := dynamicinformer.NewFilteredDynamicInformer(o.Dynamic, gvr, ns, 0,
			toolscache.Indexers{targetIndex: indexTarget},
			func(lo *metav1.ListOptions) { lo.FieldSelector = field }).Informer()
		_, err := inf.AddEventHandler(a.handlers(ctx))
		if err = errors.Join(inf.SetTransform(transform(a.kind)), err); err != nil {
			cancel()
			return fmt.Errorf("informer of %s: %w", a.Name(), err)
		}
		infs = append(infs, inf)
	}
	for _, inf := range infs {
		go inf.RunWithContext(ctx)
	}
	a.mu.Lock()
	a.parent, a.cancel, a.infs = parent, cancel, infs
	a.mu.Unlock()
	return nil
}

// Disable stops the informers and forgets the producers. The Secrets they
// produced are enqueued, since they have no producer of this kind any
// more: from another goroutine, as Enqueue may wait for the controller to
// run (on a standby, until the process ends).
func (a *api) Disable() {
	a.mu.Lock()
	parent, cancel, infs := a.parent, a.cancel, a.infs
	a.parent, a.cancel, a.infs = nil, nil, nil
	a.mu.Unlock()
	if cancel == nil {
		return
	}
	var gone []any
	for _, inf := range infs {
		gone = append(gone, inf.GetStore().List()...)
	}
	cancel()
	go func() {
		enqueue := a.enqueue(parent)
		for _, obj := range gone {
			enqueue(obj)
		}
	}()
}

// informers returns the running informers (none when disabled).
func (a *api) informers() []toolscache.SharedIndexInformer {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.infs
}

// indexTarget indexes a trimmed producer by the Secret it produces.
func indexTarget(obj any) ([]string, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil
	}
	if t := target(u); t != "" {
		return []string{u.GetNamespace() + "/" + t}, nil
	}
	return nil, nil
}

// handlers enqueue the Secret a producer produces when it is created or
// deleted after the first list, or when what the rules read changes
// (generation, version, target, status); both Secrets when its target
// moves.
func (a *api) handlers(ctx context.Context) toolscache.ResourceEventHandler {
	enqueue := a.enqueue(ctx)
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if !initial {
				enqueue(obj)
			}
		},
		UpdateFunc: func(old, cur any) {
			o, okOld := old.(*unstructured.Unstructured)
			c, okCur := cur.(*unstructured.Unstructured)
			if okOld && okCur && judged(o, c) {
				return
			}
			if okOld && okCur && target(o) != target(c) {
				enqueue(old)
			}
			enqueue(cur)
		},
		DeleteFunc: enqueue,
	}
}

// enqueue returns a function enqueueing the Secret a trimmed producer
// produces.
func (a *api) enqueue(ctx context.Context) func(obj any) {
	return func(obj any) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok || target(u) == "" || a.f.opts.Enqueue == nil {
			return
		}
		a.f.opts.Enqueue(ctx, object.Ref{Kind: "Secret", Namespace: u.GetNamespace(), Name: target(u)})
	}
}

// judged tells whether two trimmed versions of a producer are alike in
// everything the rules read.
func judged(a, b *unstructured.Unstructured) bool {
	return a.GetGeneration() == b.GetGeneration() && target(a) == target(b) &&
		cachedVersion(a) == cachedVersion(b) && reflect.DeepEqual(a.Object["status"], b.Object["status"])
}

// Options says what a Follower follows and whom it tells.
type Options struct {
	// Dynamic reads the producers; required.
	Dynamic dynamic.Interface
	// Namespaces to follow; empty: all. IgnoreNamespaces are left out.
	Namespaces       []string
	IgnoreNamespaces []string
	// Enqueue is called with the Secret a followed producer produces when
	// the producer's status or generation changes, so that the controller
	// looks again at the workloads reading it. Nil: nobody is told.
	Enqueue func(ctx context.Context, source object.Ref)
	// Owners finds and reads the other producers, the controller owners
	// of sources (owner.go); nil: only the known kinds are producers.
	Owners *Owners
	// Now is the clock of ForceSync's annotation; nil: time.Now.
	Now func() time.Time
	// Log receives the log lines.
	Log logr.Logger
}

// Follower follows the known producer kinds while their CRDs are served
// and judges the producers of sources. A nil *Follower follows nothing:
// the feature is off.
type Follower struct {
	opts Options
	apis []*api

	mu     sync.Mutex
	forced map[object.Ref]string // ExternalSecrets sent a force-sync: their resource version before it
}

// New returns a Follower; nothing is followed until its APIs are enabled
// (APIs, through served.Kinds).
func New(opts Options) *Follower {
	f := &Follower{opts: opts, forced: map[object.Ref]string{}}
	for _, k := range kinds {
		f.apis = append(f.apis, &api{f: f, kind: k})
	}
	return f
}

// APIs returns the optional APIs to follow while they are served, for
// served.NewKinds; none for a nil Follower.
func (f *Follower) APIs() []served.Optional {
	if f == nil {
		return nil
	}
	out := make([]served.Optional, len(f.apis))
	for i, a := range f.apis {
		out[i] = a
	}
	return out
}
