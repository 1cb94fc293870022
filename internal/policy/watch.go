package policy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/watcher-dev/watcher/api/v1alpha1"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/packed"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/served"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Resource is the API resource of ReloadPolicies.
const Resource = "reloadpolicies"

// Scheme returns a scheme that knows the watcher.dev types.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("scheme of %s: %w", v1alpha1.GroupVersion, err)
	}
	return s, nil
}

// Watcher keeps Index in line with the ReloadPolicies of the watched
// namespaces, through an informer that runs only while the API server
// serves the CRD: it follows the CRD through Served, like the optional
// workload kinds (discovery is asked at start and when the CRD changes),
// and acts on each answer as next says. One answer without the
// CRD (an API server restarting, an aggregated-discovery hiccup) changes
// nothing: the policies are switched off only once every answer for
// Confirm (two at least) said the CRD is not served; after the first, the
// watcher asks Served for another once Confirm has passed. Meanwhile the
// informers keep what they hold (a relist that fails keeps the cache), so
// windows still hold, dryRun targets are still not written, and the
// references policies add are kept. (A CRD really deleted has its
// ReloadPolicies deleted first, which the informers see as deletions.)
//
// Each policy change re-indexes, in the store, the workloads the policy
// selected before and selects after (their references change) and hands
// them to Changed, with the policy, so that they are reconciled and the
// policy's status written. It runs on every replica, like the store.
type Watcher struct {
	Index *Index
	Store Workloads
	// Namespaces are the watched namespaces; empty: all.
	Namespaces []string
	// Served follows the CRD; Start needs it.
	Served *served.Watcher
	// Confirm is how long the CRD must be seen not served before the
	// policies are switched off; 0: DefaultConfirm.
	Confirm time.Duration
	Log     logr.Logger
	// now reads the clock; nil: time.Now.
	now func() time.Time

	rest rest.Interface

	mu   sync.Mutex
	infs []toolscache.SharedIndexInformer
	// initial counts the informers whose initial list is not yet applied
	// (see applyInitial); initialNS holds the namespaces it concerns.
	initial   int
	initialNS map[string]bool
	stop      context.CancelFunc
	checked   bool // the discovery API answered once
	absent    absence
	said      bool // "policies are off" was logged
	changed   func(policy string, workloads []workload.Key)

	// shared holds one value for each distinct target selector of the
	// stored policies (see slim); at most maxShared.
	sharedMu sync.Mutex
	shared   map[string]*metav1.LabelSelector
}

// targetKinds holds the kinds a target may name.
var targetKinds = map[v1alpha1.TargetKind]v1alpha1.TargetKind{
	v1alpha1.TargetDeployment: v1alpha1.TargetDeployment, v1alpha1.TargetStatefulSet: v1alpha1.TargetStatefulSet,
	v1alpha1.TargetDaemonSet: v1alpha1.TargetDaemonSet, v1alpha1.TargetCronJob: v1alpha1.TargetCronJob,
	v1alpha1.TargetRollout: v1alpha1.TargetRollout,
}

// maxShared bounds the distinct selectors Watcher shares: past it, it
// starts again empty.
const maxShared = 4096

// slim is the transform of the policy informers: it drops what watcher
// never reads of a ReloadPolicy (its managed fields), and makes equal
// selectors of the targets share one value (read only, like every stored
// object): 2,000 policies of 100 targets on 26 selectors hold 26, not
// 200,000 (the informer's objects were most of watcher's heap).
func (w *Watcher) slim(obj any) (any, error) {
	p, ok := obj.(*v1alpha1.ReloadPolicy)
	if !ok {
		return obj, nil
	}
	p.ManagedFields = nil
	// The decoder grew the list as it read it: kept at its length.
	p.Spec.Targets = slices.Clone(p.Spec.Targets)
	w.sharedMu.Lock()
	defer w.sharedMu.Unlock()
	for i := range p.Spec.Targets {
		if k, ok := targetKinds[p.Spec.Targets[i].Kind]; ok {
			p.Spec.Targets[i].Kind = k // one string per kind, not per target
		}
		s := p.Spec.Targets[i].Selector
		if s == nil {
			continue
		}
		key := selectorText(s)
		shared, ok := w.shared[key]
		if !ok {
			if w.shared == nil || len(w.shared) >= maxShared {
				w.shared = map[string]*metav1.LabelSelector{}
			}
			shared = s
			w.shared[key] = shared
		}
		p.Spec.Targets[i].Selector = shared
	}
	return p, nil
}

// Workloads is what Watcher reads from the store (store.Store).
type Workloads interface {
	// Get returns the stored object of kind namespace/name, or nil.
	Get(kind, namespace, name string) (*metav1.PartialObjectMetadata, error)
	// Workloads returns the stored workloads of kind in namespace.
	Workloads(kind, namespace string) ([]*packed.Object, error)
	// List returns the stored ConfigMaps or Secrets of namespace.
	List(kind refs.Kind, namespace string) ([]*packed.Object, error)
	// UsersOf returns the workloads whose references name kind
	// namespace/name.
	UsersOf(kind refs.Kind, namespace, name string) ([]workload.Key, error)
	// Reindex runs the index functions again on a stored workload.
	Reindex(kind, namespace, name string) (bool, error)
}

// NewWatcher returns a Watcher reading with cfg.
func NewWatcher(cfg *rest.Config, ix *Index, st Workloads, namespaces []string, log logr.Logger) (*Watcher, error) {
	s, err := Scheme()
	if err != nil {
		return nil, err
	}
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &v1alpha1.GroupVersion
	c.APIPath = "/apis"
	c.NegotiatedSerializer = serializer.NewCodecFactory(s).WithoutConversion()
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("create client of %s: %w", v1alpha1.GroupVersion, err)
	}
	return &Watcher{Index: ix, Store: st, Namespaces: namespaces, Log: log, rest: rc}, nil
}

// OnChange sets the function called with each changed policy
// ("namespace/name") and the workloads it concerns. Until it is set (the
// controller has not started: a standby) the index is kept all the same.
func (w *Watcher) OnChange(f func(policy string, workloads []workload.Key)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.changed = f
}

// NeedLeaderElection is false: see Watcher.
func (w *Watcher) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable: it follows the CRD until ctx is
// done, then releases every policy.
func (w *Watcher) Start(ctx context.Context) error {
	if w.Served == nil {
		return errors.New("policy watcher: no served.Watcher to follow the CRD")
	}
	w.Served.Follow(api, w.answer)
	<-ctx.Done()
	w.off()
	return nil
}

// Synced tells whether the discovery API answered once and, if the CRD is
// served, the informers have synced: the controller starts no worker
// before, so that no workload is decided without its policies.
func (w *Watcher) Synced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.checked || w.initial > 0 {
		return false
	}
	for _, inf := range w.infs {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}

// On tells whether the policy informers run.
func (w *Watcher) On() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stop != nil
}

// answer starts or stops the informers as the CRD comes and goes (see
// next); while an absence waits to be confirmed, it returns how long
// until the answer that may confirm it.
func (w *Watcher) answer(ctx context.Context, a served.Answer) (again time.Duration) {
	isServed, known := a.Served, a.Known
	now := time.Now()
	if w.now != nil {
		now = w.now()
	}
	confirm := w.Confirm
	if confirm == 0 {
		confirm = DefaultConfirm
	}
	on := w.On()
	since := w.absent.since
	act, absent := next(answer{served: isServed, known: known, on: on, now: now}, w.absent, confirm)
	w.absent = absent
	switch act {
	case actStart:
		w.on(ctx)
		w.Log.Info("ReloadPolicy CRD served; policies on", "apiVersion", v1alpha1.GroupVersion.String())
	case actStop:
		w.off()
		w.Log.Info("ReloadPolicy CRD gone; policies off, what they held released", "absentFor", now.Sub(since).String())
	case actWait:
		if absent.answers == 1 {
			w.Log.Info("ReloadPolicy CRD not served; policies kept until its absence is confirmed", "confirm", confirm.String())
		}
		again = max(absent.since.Add(confirm).Sub(now), 0) + confirmSlack
	case actKeep:
		if !on && !isServed && known && !w.said {
			w.Log.Info("ReloadPolicy CRD not installed; policies are off until it is", "apiVersion", v1alpha1.GroupVersion.String())
			w.said = true
		}
	}
	if known {
		w.mu.Lock()
		w.checked = true
		w.mu.Unlock()
	}
	return again
}

// confirmSlack is added to the wait for the answer that may confirm an
// absence, so that it comes after Confirm has passed.
const confirmSlack = 100 * time.Millisecond

// api is the ReloadPolicy API, as Served follows it.
var api = served.API{GroupVersion: v1alpha1.GroupVersion.String(), Resource: Resource}

// on starts one informer per watched namespace.
func (w *Watcher) on(ctx context.Context) {
	namespaces := object.Namespaces(w.Namespaces)
	ctx, cancel := context.WithCancel(ctx)
	var infs []toolscache.SharedIndexInformer
	for _, ns := range namespaces {
		lw := toolscache.NewListWatchFromClient(w.rest, Resource, ns, fields.Everything())
		inf := toolscache.NewSharedIndexInformer(lw, &v1alpha1.ReloadPolicy{}, 0, toolscache.Indexers{})
		// Handlers run in one goroutine per informer; the index is safe
		// for concurrent use. The policies of the initial list are only
		// indexed, and applied together once they all are.
		if err := inf.SetTransform(w.slim); err != nil {
			w.Log.Error(err, "Cannot slim ReloadPolicies")
		}
		reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj any, initial bool) {
				if initial {
					w.setInitial(obj)
					return
				}
				w.set(obj)
			},
			UpdateFunc: func(_, obj any) { w.set(obj) },
			DeleteFunc: w.delete,
		})
		if err != nil {
			w.Log.Error(err, "Cannot watch ReloadPolicies")
			continue
		}
		infs = append(infs, inf)
		go inf.RunWithContext(ctx)
		go func() {
			if toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
				w.applyInitial()
			}
		}()
	}
	w.mu.Lock()
	w.infs, w.stop, w.initial = infs, cancel, len(infs)
	w.mu.Unlock()
}

// setInitial indexes a policy of an informer's initial list; applyInitial
// applies them.
func (w *Watcher) setInitial(obj any) {
	p, ok := obj.(*v1alpha1.ReloadPolicy)
	if !ok {
		return
	}
	w.Index.Set(Compile(p))
	w.mu.Lock()
	if w.initialNS == nil {
		w.initialNS = map[string]bool{}
	}
	w.initialNS[p.Namespace] = true
	w.mu.Unlock()
}

// applyInitial applies the policies of an informer's initial list, all at
// once: the workloads that any policy of their namespaces applies to are
// found in one pass per namespace (each distinct target selector asked
// once, see Index.selected), re-indexed and handed on, with every
// policy of these namespaces (for its status). Applying them one by one
// would cost a pass over the namespace's workloads per policy: minutes of
// CPU for 2,000 policies before the controller could start.
func (w *Watcher) applyInitial() {
	w.mu.Lock()
	namespaces := w.initialNS
	w.initialNS = nil
	w.mu.Unlock()
	var keys []workload.Key
	var policies []string
	for ns := range namespaces {
		sel, err := w.Index.selected(ns, w.Store)
		if err != nil {
			w.Log.Error(err, "Cannot find the workloads of the policies of a namespace", "namespace", ns)
		}
		keys = append(keys, sel...)
		for _, p := range w.Index.In(ns) {
			policies = append(policies, p.Key())
		}
	}
	w.reindex(keys)
	w.Log.V(1).Info("Policies applied", "policies", len(policies), "workloads", len(keys))
	w.notify("", keys)
	for _, p := range policies {
		w.notify(p, nil)
	}
	w.mu.Lock()
	if w.initial > 0 {
		w.initial--
	}
	w.mu.Unlock()
}

// off stops the informers and releases every policy.
func (w *Watcher) off() {
	w.mu.Lock()
	stop := w.stop
	w.infs, w.stop, w.initial, w.initialNS = nil, nil, 0, nil
	w.mu.Unlock()
	if stop == nil {
		return
	}
	stop()
	for _, p := range w.Index.Clear() {
		w.apply(p, nil)
	}
}

// Policy returns the ReloadPolicy namespace/name as the informer holds it
// (read only), or nil.
func (w *Watcher) Policy(namespace, name string) *v1alpha1.ReloadPolicy {
	w.mu.Lock()
	infs := w.infs
	w.mu.Unlock()
	for _, inf := range infs {
		obj, found, err := inf.GetStore().GetByKey(namespace + "/" + name)
		if err == nil && found {
			if p, ok := obj.(*v1alpha1.ReloadPolicy); ok {
				return p
			}
		}
	}
	return nil
}

func (w *Watcher) set(obj any) {
	p, ok := obj.(*v1alpha1.ReloadPolicy)
	if !ok {
		return
	}
	old := w.Index.Get(p.Namespace, p.Name)
	if old != nil && old.Generation == p.Generation {
		w.notify(old.Key(), nil) // a status write: nothing changes
		return
	}
	next := Compile(p)
	w.Index.Set(next)
	w.apply(old, next)
}

func (w *Watcher) delete(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*v1alpha1.ReloadPolicy)
	if !ok {
		return
	}
	if old := w.Index.Delete(p.Namespace, p.Name); old != nil {
		w.apply(old, nil)
	}
}

// apply re-indexes the workloads that old selected and next selects (one
// of them may be nil), the index already holding next, and hands them on.
func (w *Watcher) apply(old, next *Policy) {
	var keys []workload.Key
	seen := map[workload.Key]bool{}
	policy := ""
	for _, p := range []*Policy{old, next} {
		if p == nil {
			continue
		}
		policy = p.Key()
		sel, err := Selected(p, w.Store)
		if err != nil {
			w.Log.Error(err, "Cannot find the workloads of a policy", "policy", p.Key())
		}
		for _, k := range sel {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	w.reindex(keys)
	w.Log.V(1).Info("Policy changed", "policy", policy, "workloads", len(keys))
	w.notify(policy, keys)
}

// reindex re-indexes the workloads keys in the store.
func (w *Watcher) reindex(keys []workload.Key) {
	for _, k := range keys {
		if _, err := w.Store.Reindex(k.Kind, k.Namespace, k.Name); err != nil {
			w.Log.Error(err, "Cannot index workload again", "workload", k.String())
		}
	}
}

func (w *Watcher) notify(policy string, keys []workload.Key) {
	w.mu.Lock()
	f := w.changed
	w.mu.Unlock()
	if f != nil {
		f(policy, keys)
	}
}
