// Package served tells watcher when the optional APIs it follows (custom
// resources such as Argo's Rollout, Bitnami's SealedSecret or watcher's own
// ReloadPolicy) start and stop being served, without asking the API server
// again and again while nothing changes.
//
// A Watcher keeps a metadata-only informer on CustomResourceDefinitions
// (names and resource versions only: no schemas in memory) and asks the
// discovery API about an API only when it has a reason to:
//
//	when                                   discovery calls for the API
//	start                                  one
//	an add, update or delete of its CRD    one, then again with backoff
//	                                       (250ms doubling to 4s, six times,
//	                                       about 12s) while the answer does
//	                                       not match the CRD (a new CRD is
//	                                       served only once Established)
//	a failed call (not a 404)              one, then again with the same
//	                                       backoff, until one answers
//	a follower asks again after d          one, after d
//	nothing changes                        none
//
// If CRDs cannot be listed and watched (the RBAC of an older install, an
// API server without apiextensions.k8s.io/v1), it says so once and asks
// discovery about every API each Fallback instead: slower, never lost.
//
// Kinds follows the optional APIs through a Watcher and watches each one
// (an Optional) only while it is served.
package served

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// DefaultFallback is how often discovery is asked about each API when
// CRDs cannot be watched.
const DefaultFallback = time.Minute

// Backoff of the checks that follow a CRD event while discovery does not
// agree with the CRD yet: 250ms, 500ms, 1s, 2s, 4s, 4s.
const (
	retryBase  = 250 * time.Millisecond
	retryMax   = 4 * time.Second
	maxRetries = 6
)

// API is an optional API: a resource of a group version, defined by the
// CustomResourceDefinition named resource.group.
type API struct {
	// GroupVersion is looked up in discovery: "argoproj.io/v1alpha1".
	GroupVersion string
	// Resource is the plural, lower case: "rollouts".
	Resource string
}

// CRD returns the name of the API's CustomResourceDefinition:
// "rollouts.argoproj.io".
func (a API) CRD() string {
	gv, err := schema.ParseGroupVersion(a.GroupVersion)
	if err != nil {
		return a.Resource
	}
	return a.Resource + "." + gv.Group
}

// Answer is what the discovery API said about an API.
type Answer struct {
	// Served: the API server serves the resource.
	Served bool
	// Known is false when discovery failed for another reason than the
	// group version's absence; Served then tells nothing.
	Known bool
}

// Func is told each answer about an API; it returns how long to wait
// before asking again (0: not before the API's CRD changes). The answers
// about one API come one at a time; each API has its own goroutine, so
// that a Func that blocks (an optional kind's Enable waits for the
// controller, whose start may wait for another API's answer) holds up
// no other API.
type Func func(ctx context.Context, a Answer) (again time.Duration)

// follow is one followed API and its followers.
type follow struct {
	api API
	fns []Func
}

// Watcher follows the CRDs of the optional APIs and tells their
// followers whether they are served (see the package comment). It is a
// manager.Runnable that runs on every replica.
type Watcher struct {
	// Fallback is how often discovery is asked about each API when CRDs
	// cannot be watched; 0: DefaultFallback.
	Fallback time.Duration
	Log      logr.Logger

	crds      metadata.Interface
	discovery discovery.DiscoveryInterface

	mu      sync.Mutex
	follows map[string]*follow // by CRD name
	queue   workqueue.TypedRateLimitingInterface[string]
	// started: the initial checks are queued and their workers run; a
	// later Follow queues its own check (and starts a worker for a new
	// API), with ctx, Start's.
	started bool
	ctx     context.Context
	// store holds the CRDs while they are watched; nil: they are not
	// (fallback).
	store toolscache.Store
}

// New returns a Watcher reading with cfg.
func New(cfg *rest.Config, log logr.Logger) (*Watcher, error) {
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create metadata client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create discovery client: %w", err)
	}
	return NewWith(mc, dc, log), nil
}

// NewWith returns a Watcher that watches CRDs with crds and asks d: for
// tests, with client-go's fakes.
func NewWith(crds metadata.Interface, d discovery.DiscoveryInterface, log logr.Logger) *Watcher {
	return &Watcher{Log: log, crds: crds, discovery: d}
}

// Follow calls fn with each answer about api: once at start (or at once,
// if the Watcher runs already), then as the package comment says.
func (w *Watcher) Follow(api API, fn Func) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.follows == nil {
		w.follows = map[string]*follow{}
	}
	name := api.CRD()
	f := w.follows[name]
	if f == nil {
		f = &follow{api: api}
		w.follows[name] = f
	}
	f.fns = append(f.fns, fn)
	if w.started {
		if len(f.fns) == 1 {
			go w.work(w.ctx)
		}
		w.queue.Add(name)
	}
}

// NeedLeaderElection is false: standbys follow the APIs too, so that
// their caches are as warm as the leader's.
func (w *Watcher) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable: it queues one check of every
// followed API at once, watches the CRDs (or falls back to asking every
// Fallback), checks every API once more when the CRDs are listed, and runs
// the checks until ctx is done.
func (w *Watcher) Start(ctx context.Context) error {
	q := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](retryBase, retryMax),
		workqueue.TypedRateLimitingQueueConfig[string]{}) // unnamed: no metrics, however many Watchers a process runs
	w.mu.Lock()
	w.queue = q
	w.mu.Unlock()
	go func() {
		<-ctx.Done()
		q.ShutDown()
	}()
	// The first checks do not wait for the CRDs' informer: an API served
	// at start is followed at once (a SealedSecret created right after
	// watcher starts is seen created, not found in an initial list).
	w.mu.Lock()
	w.started = true
	w.ctx = ctx
	for name := range w.follows {
		go w.work(ctx)
		q.Add(name)
	}
	w.mu.Unlock()

	store, err := w.watch(ctx)
	if ctx.Err() != nil {
		return nil
	}
	fallback := w.Fallback
	if fallback == 0 {
		fallback = DefaultFallback
	}
	switch {
	case apierrors.IsForbidden(err):
		// Expected where RBAC grants nothing cluster-wide: said once,
		// plainly, not as a refusal.
		w.Log.Info("Not allowed to watch CustomResourceDefinitions; asking discovery about the optional APIs every interval instead",
			"interval", fallback.String())
	case err != nil:
		w.Log.Info("Cannot watch CustomResourceDefinitions; asking discovery about the optional APIs every interval instead",
			"interval", fallback.String(), "error", err.Error())
	}
	w.mu.Lock()
	w.store = store
	if store != nil {
		// Once more now that the CRDs are known, for every API followed by
		// now (also those whose Follow came after Start: their first check
		// may have run before the CRDs were known): a CRD made between the
		// first checks and the informer's list is in that list, which
		// changes nothing by itself, and a CRD event that came before
		// the store was set was judged without it.
		for name := range w.follows {
			q.Add(name)
		}
	}
	w.mu.Unlock()
	if store == nil {
		go w.poll(ctx, fallback)
	}
	<-ctx.Done()
	return nil
}

// work runs the queued checks until the queue is shut down; there is one
// per followed API (see Func).
func (w *Watcher) work(ctx context.Context) {
	for w.next(ctx) {
	}
}

// next runs the next queued check; false once the queue is shut down.
func (w *Watcher) next(ctx context.Context) bool {
	name, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(name)
	w.check(ctx, name)
	return true
}

// check asks discovery about the API whose CRD is name, tells its
// followers, and queues the checks that follow: again with backoff while
// the answer does not match the CRD, and when a follower asks.
func (w *Watcher) check(ctx context.Context, name string) {
	w.mu.Lock()
	f := w.follows[name]
	fns := append([]Func(nil), f.fns...)
	store := w.store
	w.mu.Unlock()
	a := w.ask(f.api)
	var again time.Duration
	for _, fn := range fns {
		if d := fn(ctx, a); d > 0 && (again == 0 || d < again) {
			again = d
		}
	}
	switch {
	case !a.Known:
		// Discovery failed: ask again, as long as it fails.
		w.queue.AddRateLimited(name)
	case store != nil && a.Served != defined(store, name) && w.queue.NumRequeues(name) < maxRetries:
		// Discovery does not agree with the CRD yet.
		w.queue.AddRateLimited(name)
	default:
		w.queue.Forget(name)
	}
	if again > 0 {
		w.queue.AddAfter(name, again)
	}
}

// Watching tells whether the CRDs are watched (listed, and followed from
// then on); false before, and when asking every Fallback instead.
func (w *Watcher) Watching() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.store != nil
}

// ask asks the discovery API whether api is served.
func (w *Watcher) ask(api API) Answer { return Ask(w.discovery, api, w.Log) }

// Ask asks the discovery API whether api is served, with one call; a
// failure is logged at V(1).
func Ask(d discovery.DiscoveryInterface, api API, log logr.Logger) Answer {
	list, err := d.ServerResourcesForGroupVersion(api.GroupVersion)
	if apierrors.IsNotFound(err) {
		return Answer{Known: true}
	}
	if err != nil {
		log.V(1).Info("Cannot tell whether an API is served", "apiVersion", api.GroupVersion, "resource", api.Resource, "error", err.Error())
		return Answer{}
	}
	for _, r := range list.APIResources {
		if r.Name == api.Resource {
			return Answer{Served: true, Known: true}
		}
	}
	return Answer{Known: true}
}
