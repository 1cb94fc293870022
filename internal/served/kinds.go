package served

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// Optional is something watched only while the API server serves its
// resource: an optional workload kind (Argo's Rollout) or SealedSecrets.
type Optional interface {
	// Name names it in logs: "Rollout", "SealedSecret".
	Name() string
	// APIVersion and Resource are the group version and the resource
	// (plural, lower case) looked up in discovery.
	APIVersion() string
	Resource() string
	// Enabled tells whether it is watched.
	Enabled() bool
	// Enable starts watching it; Disable stops and forgets it.
	Enable(ctx context.Context) error
	Disable()
}

// Kinds watches the optional APIs (custom resources such as Argo's
// Rollout or Bitnami's SealedSecret) only while the API server serves
// them, without a restart of watcher. It follows each one through a
// Watcher (a watch of their CRDs: discovery is asked at start and when a
// CRD changes, not every few seconds) and acts on each answer:
//
//	served  enabled  action
//	yes     no       Enable: for a workload kind, the store starts the
//	                 kind's informers and each becomes a source of the
//	                 controller (Watch works after start)
//	no      yes      Disable: the informers stop and their objects are
//	                 forgotten
//	unknown any      nothing (a failed discovery call changes nothing)
//
// It runs on every replica, like the store, so that a standby's caches are
// as warm as the leader's.
type Kinds struct {
	apis   []Optional
	served *Watcher
	log    logr.Logger

	mu       sync.Mutex
	answered map[string]bool // the APIs asked about once, by name
}

// NewKinds returns the follower of apis through w.
func NewKinds(apis []Optional, w *Watcher, log logr.Logger) *Kinds {
	return &Kinds{apis: apis, served: w, log: log}
}

// NeedLeaderElection is false: see Kinds.
func (o *Kinds) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable: it follows every optional API until
// ctx is done. The answers about one API come one at a time, so its Enable
// and Disable are never called at once.
func (o *Kinds) Start(ctx context.Context) error {
	for _, a := range o.apis {
		o.served.Follow(API{GroupVersion: a.APIVersion(), Resource: a.Resource()},
			func(ctx context.Context, ans Answer) time.Duration {
				return o.apply(ctx, a, ans)
			})
	}
	<-ctx.Done()
	return nil
}

// answer notes that the API called name was asked about.
func (o *Kinds) answer(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.answered == nil {
		o.answered = map[string]bool{}
	}
	o.answered[name] = true
}

// Checked is a readiness check: it passes once every optional API was
// asked about once (answered or not), so that a watcher reported ready
// follows the optional APIs the API server serves (their informers then
// start; what is created before they have listed is found, not reported
// as created). A failed discovery call counts as asked: readiness never
// waits on discovery.
func (o *Kinds) Checked(*http.Request) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, a := range o.apis {
		if !o.answered[a.Name()] {
			return fmt.Errorf("%s not looked up in discovery yet", a.Name())
		}
	}
	return nil
}

// retryEnable is how long to wait before asking again about an API that
// could not be enabled.
const retryEnable = 10 * time.Second

// apply enables a if it is served and disables it if it is not; it
// returns how long to wait before asking again (see Func).
func (o *Kinds) apply(ctx context.Context, a Optional, ans Answer) time.Duration {
	defer o.answer(a.Name())
	switch {
	case !ans.Known:
	case ans.Served && !a.Enabled():
		if err := a.Enable(ctx); err != nil {
			o.log.Error(err, "Cannot watch kind", "kind", a.Name())
			return retryEnable
		}
		o.log.Info("Kind served; watching it", "kind", a.Name(), "apiVersion", a.APIVersion())
	case !ans.Served && a.Enabled():
		a.Disable()
		o.log.Info("Kind no longer served; stopped watching it", "kind", a.Name(), "apiVersion", a.APIVersion())
	}
	return 0
}
