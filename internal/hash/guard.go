package hash

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	corev1informers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrKeyChanged is returned by Guard while the key a replica holds is no
// longer the one in the key Secret.
var ErrKeyChanged = errors.New("the hash key Secret holds another key than this replica's; not deciding until watcher restarts with it")

// Guard keeps a replica from deciding anything with a hash key that is no
// longer the installation's. Replicas with different keys cannot compare
// each other's records: a change handled by the wrong one would be adopted
// instead of restarted (lost), and two of them would re-adopt each other's
// records forever.
//
//	the key Secret                        Guard
//	holds this replica's key              nothing to do
//	deleted while this replica runs       creates it again with this replica's
//	                                      key: no rotation, nothing adopted
//	holds another key (rotated, or made   Current and Verify fail from then on;
//	  by a replica started meanwhile)     Start returns ErrKeyChanged, so that
//	                                      watcher exits and restarts with it
//
// The watch can lag; Verify, called before a record made with a foreign key
// is adopted, reads the Secret from the API server.
type Guard struct {
	cs        kubernetes.Interface
	c         client.Client
	namespace string
	name      string
	key       []byte
	log       logr.Logger

	stale   atomic.Bool
	changed chan struct{}
	once    sync.Once

	mu       sync.Mutex
	verified time.Time
}

// verifyEvery is how often Verify reads the Secret at most: adopting
// thousands of records after a rotation costs one read, not thousands.
const verifyEvery = time.Second

// NewGuard returns a Guard of key, kept in the Secret namespace/name. cs
// watches the Secret; c reads it uncached and creates it again.
func NewGuard(cs kubernetes.Interface, c client.Client, namespace, name string, key []byte, log logr.Logger) *Guard {
	return &Guard{cs: cs, c: c, namespace: namespace, name: name, key: key, log: log, changed: make(chan struct{})}
}

// Current returns ErrKeyChanged once the key is known to be stale. A nil
// Guard guards nothing.
func (g *Guard) Current() error {
	if g != nil && g.stale.Load() {
		return ErrKeyChanged
	}
	return nil
}

// Verify reads the key Secret from the API server (at most every
// verifyEvery) and returns ErrKeyChanged if it holds another key.
func (g *Guard) Verify(ctx context.Context) error {
	if g == nil {
		return nil
	}
	if err := g.Current(); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if time.Since(g.verified) < verifyEvery {
		return nil
	}
	var s corev1.Secret
	err := g.c.Get(ctx, types.NamespacedName{Namespace: g.namespace, Name: g.name}, &s)
	switch {
	case apierrors.IsNotFound(err):
		g.recreate(ctx)
		return g.Current()
	case err != nil:
		return fmt.Errorf("get hash key secret %s/%s: %w", g.namespace, g.name, err)
	}
	g.check(&s)
	if err := g.Current(); err != nil {
		return err
	}
	g.verified = time.Now()
	return nil
}

// Start watches the key Secret until ctx is done, or returns ErrKeyChanged
// once it holds another key. It runs on every replica.
func (g *Guard) Start(ctx context.Context) error {
	inf := corev1informers.NewFilteredSecretInformer(g.cs, g.namespace, 0, toolscache.Indexers{}, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", g.name).String()
	})
	_, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { g.checkObj(obj) },
		UpdateFunc: func(_, obj any) { g.checkObj(obj) },
		DeleteFunc: func(any) { g.recreate(ctx) },
	})
	if err != nil {
		return fmt.Errorf("watch hash key secret: %w", err)
	}
	go inf.RunWithContext(ctx)
	select {
	case <-ctx.Done():
		return nil
	case <-g.changed:
		return fmt.Errorf("hash key secret %s/%s: %w", g.namespace, g.name, ErrKeyChanged)
	}
}

// NeedLeaderElection is false: every replica must hold the current key.
func (g *Guard) NeedLeaderElection() bool { return false }

func (g *Guard) checkObj(obj any) {
	if s, ok := obj.(*corev1.Secret); ok {
		g.check(s)
	}
}

// check marks the key stale if s holds another key, or none.
func (g *Guard) check(s *corev1.Secret) {
	key, err := KeyOf(s)
	if err == nil && subtle.ConstantTimeCompare(key, g.key) == 1 {
		return
	}
	g.stale.Store(true)
	g.once.Do(func() {
		g.log.Error(ErrKeyChanged, "Hash key changed; stopping so that watcher restarts with the new key", "secret", g.namespace+"/"+g.name)
		close(g.changed)
	})
}

// recreate creates the key Secret again with this replica's key, so that a
// deleted Secret rotates nothing. If another replica made it first, with
// another key, the watch or the next Verify finds it.
func (g *Guard) recreate(ctx context.Context) {
	if g.stale.Load() {
		return
	}
	err := g.c.Create(context.WithoutCancel(ctx), keySecret(g.namespace, g.name, g.key))
	switch {
	case err == nil:
		g.log.Info("Hash key Secret was deleted; created it again with the same key", "secret", g.namespace+"/"+g.name)
	case apierrors.IsAlreadyExists(err):
	default:
		g.log.Error(err, "Cannot create the hash key Secret again", "secret", g.namespace+"/"+g.name)
	}
}
