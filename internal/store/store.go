// Package store holds what watcher knows of the cluster, in client-go
// informers: every watched workload and every watched ConfigMap and Secret,
// each trimmed to a small metav1.PartialObjectMetadata (see packages slim
// and hash), never its content, and kept packed (package packed).
//
// Workloads are indexed by the "namespace/name" of each ConfigMap and Secret
// they use, so that the users of a changed object are found with one index
// lookup per workload kind: no LIST call, work proportional to the users.
//
// One informer runs per kind and per watched namespace (one for all
// namespaces when none is given); label selectors and the ignored namespaces
// are applied by the API server. With a namespace selector, one more
// informer holds the namespaces it matches (see Selected): the others stay
// watched, and are left alone by the controller.
//
// The informers are the controller's sources: Syncing makes one the
// controller waits for, and OptionalWorkload makes those of an optional
// workload kind sources while its API is served.
package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	corev1informers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/packed"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/sealed"
	"github.com/watcher-dev/watcher/internal/slim"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Indexes on the workload informers: the "namespace/name" of each ConfigMap,
// respectively Secret, a workload uses.
const (
	IndexConfigMaps = "configMaps"
	IndexSecrets    = "secrets"
	// IndexWildcards holds "Kind/namespace" for each kind of which a
	// workload matches objects rather than naming them (see
	// resolve.Matcher): it uses whichever objects of that kind its
	// namespace holds.
	IndexWildcards = "wildcards"
)

// ErrorOperation is the operation label of metrics.Errors for workloads
// that cannot be indexed.
const ErrorOperation = "index"

// Options says what to watch.
type Options struct {
	// OnGet, when set, is told of every Get (a seam for the tests that
	// count the reads of one change).
	OnGet func(kind, namespace, name string)
	// Namespaces to watch; empty: all.
	Namespaces []string
	// IgnoredKinds are workload kinds not watched at all (kind names).
	IgnoredKinds []string
	// WorkloadSelector and ConfigSelector are label selectors; empty: all.
	WorkloadSelector string
	ConfigSelector   string
	// NamespaceSelector, when set, is the label selector of the namespaces
	// handled (see Selected); the informers of the other kinds still watch
	// every namespace, so that a namespace that comes to match needs no
	// new informer.
	NamespaceSelector string
	// IgnoreConfigMapNamespaces and IgnoreSecretNamespaces are left out.
	IgnoreConfigMapNamespaces []string
	IgnoreSecretNamespaces    []string
	// Hasher digests ConfigMaps and Secrets.
	Hasher *hash.Hasher
	// WorkloadAnnotations and ConfigAnnotations are the annotations kept.
	WorkloadAnnotations []string
	ConfigAnnotations   []string
	// Log receives the workloads that cannot be indexed or trimmed; the
	// zero Logger discards them.
	Log logr.Logger
	// Refs gives the references a workload is indexed by (the reconciler
	// decides with the same function, see package resolve); nil: those of
	// its pod spec.
	Refs func(client.Object) ([]refs.Ref, error)
	// Wildcards gives the kinds of which a workload matches objects of its
	// namespace (resolve.Resolver.Wildcards); nil: none.
	Wildcards func(client.Object) []refs.Kind
	// Dynamic reads the optional kinds (custom resources) while their API
	// is served (see Enable); nil: they are never watched.
	Dynamic dynamic.Interface
	// Annotate, when set, records on each stored workload what Refs and
	// Wildcards read from outside the object (policies), as it stands when
	// the workload is stored, so that the index functions always give the
	// same answer for a stored object; Reindex calls it again.
	Annotate func(*metav1.PartialObjectMetadata)
	// Keys renames the installation's annotation keys to watcher's on the
	// way in (optin.Keys); nil: none.
	Keys optin.Keys
}

// Store is the set of informers.
type Store struct {
	// mu guards byKind and optional: the informers of optional kinds come
	// and go while the store is read.
	mu sync.RWMutex
	// byKind maps a kind ("Deployment", "ConfigMap"...) to its informers,
	// by namespace ("" for all).
	byKind map[string]map[string]toolscache.SharedIndexInformer
	// optional stops the informers of each enabled optional kind.
	optional map[string]context.CancelFunc
	// static are the kinds created by New, run by Start.
	static     []string
	opts       Options
	namespaces []string
	workloads  toolscache.TransformFunc
}

// New creates the informers; Start runs them.
func New(cs kubernetes.Interface, o Options) (*Store, error) {
	namespaces := object.Namespaces(o.Namespaces)
	workloads := packs(annotated(renamed(o.Keys, slim.Workload(o.Log, o.WorkloadAnnotations...)), o.Annotate))
	s := &Store{
		byKind:   map[string]map[string]toolscache.SharedIndexInformer{},
		optional: map[string]context.CancelFunc{},
		opts:     o, namespaces: namespaces, workloads: workloads,
	}
	configs := renamed(o.Keys, o.Hasher.Transform(o.ConfigAnnotations...))
	for _, ns := range namespaces {
		for _, k := range workload.Kinds {
			if k.NewInformer == nil || slices.Contains(o.IgnoredKinds, k.Name()) {
				continue // optional kinds: Enable; ignored kinds: never
			}
			inf := k.NewInformer(cs, ns, internalinterfaces.InformerOptions{
				Indexers:         indexers(o.Log, refsOr(o.Refs), o.Wildcards),
				TweakListOptions: selectors(o.WorkloadSelector, nil),
			})
			if err := s.add(k.Name(), ns, inf, workloads); err != nil {
				return nil, err
			}
		}
		cm := corev1informers.NewConfigMapInformerWithOptions(cs, ns, internalinterfaces.InformerOptions{
			TweakListOptions: selectors(o.ConfigSelector, o.IgnoreConfigMapNamespaces),
			Indexers:         byNamespace(ns),
		})
		sec := corev1informers.NewSecretInformerWithOptions(cs, ns, internalinterfaces.InformerOptions{
			TweakListOptions: selectors(o.ConfigSelector, o.IgnoreSecretNamespaces),
			Indexers:         byNamespace(ns),
		})
		if err := s.add(string(refs.ConfigMap), ns, cm, packs(keepController(configs))); err != nil {
			return nil, err
		}
		if err := s.add(string(refs.Secret), ns, sec, packs(keepController(sealed.KeepOwner(configs)))); err != nil {
			return nil, err
		}
	}
	if o.NamespaceSelector != "" {
		if err := s.add(KindNamespace, metav1.NamespaceAll, namespaceInformer(cs, o.NamespaceSelector), packs(slimNamespace)); err != nil {
			return nil, err
		}
	}
	for kind := range s.byKind {
		s.static = append(s.static, kind)
	}
	return s, nil
}

func (s *Store) add(kind, ns string, inf toolscache.SharedIndexInformer, transform toolscache.TransformFunc) error {
	if err := inf.SetTransform(transform); err != nil {
		return fmt.Errorf("informer of %s: %w", kind, err)
	}
	if s.byKind[kind] == nil {
		s.byKind[kind] = map[string]toolscache.SharedIndexInformer{}
	}
	s.byKind[kind][ns] = inf
	return nil
}

// selectors applies a label selector and, for ConfigMaps and Secrets, the
// ignored namespaces, on the server side.
func selectors(labels string, ignore []string) internalinterfaces.TweakListOptionsFunc {
	field := object.NotIn(ignore)
	return func(o *metav1.ListOptions) {
		o.LabelSelector, o.FieldSelector = labels, field
	}
}

// refsOr returns f, or workload.Refs if f is nil.
func refsOr(f func(client.Object) ([]refs.Ref, error)) func(client.Object) ([]refs.Ref, error) {
	if f == nil {
		return workload.Refs
	}
	return f
}

// indexers returns the indexes of the workload informers.
func indexers(log logr.Logger, uses func(client.Object) ([]refs.Ref, error), wildcards func(client.Object) []refs.Kind) toolscache.Indexers {
	ix := toolscache.Indexers{
		IndexConfigMaps: indexer(log, uses, refs.ConfigMap), IndexSecrets: indexer(log, uses, refs.Secret),
		// Workloads, for the label selectors of policies (Workloads).
		toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc,
	}
	if wildcards != nil {
		ix[IndexWildcards] = func(obj any) ([]string, error) {
			w, ok := obj.(client.Object)
			if !ok {
				return nil, nil
			}
			var out []string
			for _, k := range wildcards(w) {
				out = append(out, string(k)+"/"+w.GetNamespace())
			}
			return out, nil
		}
	}
	return ix
}

// byNamespace indexes the ConfigMaps or Secrets of an informer of every
// namespace by namespace, for List; an informer of one namespace needs
// none.
func byNamespace(ns string) toolscache.Indexers {
	if ns != metav1.NamespaceAll {
		return nil
	}
	return toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}
}

// indexer indexes a workload by the "namespace/name" of the objects of kind
// it uses.
//
// It never returns an error: client-go panics on one, and a single odd
// workload would then crash watcher over and over. A workload whose
// references cannot be read is logged, counted in metrics.Errors (operation
// ErrorOperation) and indexed under nothing.
func indexer(log logr.Logger, refsOf func(client.Object) ([]refs.Ref, error), kind refs.Kind) toolscache.IndexFunc {
	return func(obj any) ([]string, error) {
		w, ok := obj.(client.Object)
		if !ok {
			return nil, nil
		}
		uses, err := refsOf(w)
		if err != nil {
			log.Error(err, "Cannot index workload; its references are unreadable",
				"workload", w.GetObjectKind().GroupVersionKind().Kind+" "+w.GetNamespace()+"/"+w.GetName(), "kind", kind)
			metrics.Errors.WithLabelValues(ErrorOperation).Inc()
			return nil, nil
		}
		var names []string
		for _, r := range uses {
			if r.Kind == kind {
				names = append(names, w.GetNamespace()+"/"+r.Name)
			}
		}
		return names, nil
	}
}

// Informers returns the informers of kind, one per watched namespace.
func (s *Store) Informers(kind string) []toolscache.SharedIndexInformer {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []toolscache.SharedIndexInformer
	for _, inf := range s.byKind[kind] {
		out = append(out, inf)
	}
	return out
}

// Start runs the informers created by New until ctx is done (those of
// optional kinds run from Enable to Disable). It implements
// manager.Runnable and runs on every replica, leader or not, so that
// standbys keep warm caches.
func (s *Store) Start(ctx context.Context) error {
	for _, kind := range s.static {
		for _, inf := range s.Informers(kind) {
			go inf.RunWithContext(ctx)
		}
	}
	<-ctx.Done()
	return nil
}

// NeedLeaderElection is false: see Start.
func (s *Store) NeedLeaderElection() bool { return false }

// HasSynced reports whether every informer created by New has synced.
// Those of optional kinds are left out: their API may go away before they
// sync, and readiness should not hang on a custom resource. Nothing is
// missed meanwhile: each workload is reconciled as its informer adds it.
func (s *Store) HasSynced() bool {
	for _, kind := range s.static {
		for _, inf := range s.Informers(kind) {
			if !inf.HasSynced() {
				return false
			}
		}
	}
	return true
}

// ControllerOf returns the controller reference the store keeps of the
// ConfigMap or Secret kind namespace/name (keepController: a custom
// resource's); false when none.
func (s *Store) ControllerOf(src object.Ref) (metav1.OwnerReference, bool) {
	o, err := s.Get(src.Kind, src.Namespace, src.Name)
	if err != nil || o == nil {
		return metav1.OwnerReference{}, false
	}
	if c := metav1.GetControllerOfNoCopy(o); c != nil {
		return *c, true
	}
	return metav1.OwnerReference{}, false
}

// keepController wraps next, the transform of ConfigMaps or Secrets, so
// that the object it keeps holds its controller reference when that is a
// custom resource (its API group has a dot and is not Kubernetes' own): a
// producer that may report its progress (package producer's Owners). Most
// sources have none; a built-in controller (a Deployment) reports none.
func keepController(next toolscache.TransformFunc) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		var c *metav1.OwnerReference
		if o, ok := obj.(metav1.Object); ok {
			if ref := metav1.GetControllerOfNoCopy(o); ref != nil && customGroup(ref.APIVersion) {
				cp := metav1.OwnerReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID, Controller: ref.Controller}
				c = &cp // before next may reuse obj
			}
		}
		out, err := next(obj)
		if m, ok := out.(*metav1.PartialObjectMetadata); ok && err == nil && c != nil &&
			!slices.ContainsFunc(m.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == c.UID }) {
			m.OwnerReferences = append(m.OwnerReferences, *c)
		}
		return out, err
	}
}

// customGroup reports whether apiVersion is of a custom resource's group.
func customGroup(apiVersion string) bool {
	group, _, ok := strings.Cut(apiVersion, "/")
	return ok && strings.Contains(group, ".") && !strings.HasSuffix(group, ".k8s.io")
}

// Get returns the object of kind namespace/name, or nil if it is not there,
// as a new PartialObjectMetadata of the caller's own.
func (s *Store) Get(kind, namespace, name string) (*metav1.PartialObjectMetadata, error) {
	if s.opts.OnGet != nil {
		s.opts.OnGet(kind, namespace, name)
	}
	s.mu.RLock()
	inf := s.informer(kind, namespace)
	s.mu.RUnlock()
	if inf == nil {
		return nil, nil
	}
	obj, found, err := inf.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil || !found {
		return nil, err
	}
	return asMeta(obj)
}

// User is a workload that uses some object.
type User struct {
	Kind string
	Obj  *metav1.PartialObjectMetadata
}

// Users returns the workloads that use the ConfigMap or Secret
// namespace/name: those that name it, and those that match objects of its
// kind in its namespace (IndexWildcards), each once, each a copy of the
// caller's own.
//
//	the object, as the store holds it      users
//	a snapshot (resolve.IsSnapshot)         those that name it
//	not held (deleted, or not yet seen)     those that name it, those that
//	                                        match (it may have been a source)
//	any other                               those that name it, those that
//	                                        match
//
// A snapshot is never the source of a match (package resolve), so its
// creation (each pinned restart makes some) reconciles no workload that
// only matches; the check is one lookup in the object's informer. Limit:
// the store holds the object only as it is now, so a deleted snapshot
// reaches the matching workloads (with reload on delete; they find nothing
// to do), and a source that becomes labelled a snapshot does not (they
// resolve without it at their next reconcile).
func (s *Store) Users(kind refs.Kind, namespace, name string) ([]User, error) {
	var out []User
	err := s.eachUser(kind, namespace, name, func(k string, o *packed.Object) {
		out = append(out, User{Kind: k, Obj: o.Meta()})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eachUser calls fn with each user of the ConfigMap or Secret
// namespace/name (see Users) as the store keeps it, once.
func (s *Store) eachUser(kind refs.Kind, namespace, name string, fn func(kind string, o *packed.Object)) error {
	index := IndexConfigMaps
	if kind == refs.Secret {
		index = IndexSecrets
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	matched := s.opts.Wildcards != nil && !s.isSnapshot(kind, namespace, name)
	for _, k := range workload.Kinds {
		inf := s.informer(k.Name(), namespace)
		if inf == nil {
			continue
		}
		objs, err := inf.GetIndexer().ByIndex(index, namespace+"/"+name)
		if err != nil {
			return fmt.Errorf("look up users of %s %s/%s: %w", kind, namespace, name, err)
		}
		if matched {
			wild, err := inf.GetIndexer().ByIndex(IndexWildcards, string(kind)+"/"+namespace)
			if err != nil {
				return fmt.Errorf("look up users of %s %s/%s: %w", kind, namespace, name, err)
			}
			objs = append(objs, wild...)
		}
		users, err := asPacked(objs)
		if err != nil {
			return err
		}
		seen := make(map[string]bool, len(users))
		for _, o := range users {
			if !seen[o.GetName()] {
				seen[o.GetName()] = true
				fn(k.Name(), o)
			}
		}
	}
	return nil
}

// List returns the ConfigMaps or Secrets of namespace that the store holds,
// as it keeps them (read only). It implements resolve.Configs.
func (s *Store) List(kind refs.Kind, namespace string) ([]*packed.Object, error) {
	s.mu.RLock()
	inf := s.informer(string(kind), namespace)
	_, all := s.byKind[string(kind)][metav1.NamespaceAll]
	s.mu.RUnlock()
	if inf == nil {
		return nil, nil
	}
	var objs []any
	if all {
		var err error
		if objs, err = inf.GetIndexer().ByIndex(toolscache.NamespaceIndex, namespace); err != nil {
			return nil, fmt.Errorf("list %s in %s: %w", kind, namespace, err)
		}
	} else {
		objs = inf.GetStore().List()
	}
	return asPacked(objs)
}

// Count returns how many objects of kind the store holds.
func (s *Store) Count(kind string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for _, inf := range s.byKind[kind] {
		n += len(inf.GetStore().ListKeys())
	}
	return n
}

// informer returns the informer that holds objects of kind in namespace;
// the caller holds mu.
func (s *Store) informer(kind, namespace string) toolscache.SharedIndexInformer {
	infs := s.byKind[kind]
	if inf, ok := infs[metav1.NamespaceAll]; ok {
		return inf
	}
	return infs[namespace]
}

// asMeta returns the stored obj as a new PartialObjectMetadata.
func asMeta(obj any) (*metav1.PartialObjectMetadata, error) {
	o, ok := obj.(*packed.Object)
	if !ok {
		return nil, fmt.Errorf("store held %T, not a packed object", obj)
	}
	return o.Meta(), nil
}

// asPacked returns the stored objs as they are kept.
func asPacked(objs []any) ([]*packed.Object, error) {
	out := make([]*packed.Object, 0, len(objs))
	for _, obj := range objs {
		o, ok := obj.(*packed.Object)
		if !ok {
			return nil, fmt.Errorf("store held %T, not a packed object", obj)
		}
		out = append(out, o)
	}
	return out, nil
}

// packs returns transform followed by packing (package packed): the
// informer keeps the packed object. An object packed already passes
// unchanged (client-go may transform an object twice).
func packs(transform toolscache.TransformFunc) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		if _, done := obj.(*packed.Object); done {
			return obj, nil
		}
		out, err := transform(obj)
		if m, ok := out.(*metav1.PartialObjectMetadata); ok && err == nil {
			return packed.Pack(m), nil
		}
		return out, err
	}
}
