package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/api/v1alpha1"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/workload"
)

// notFoundRetry is how often the status of a policy whose sources or
// targets do not exist yet is looked at again (from the store: no API
// call unless it changed).
const notFoundRetry = 2 * time.Second

// StatusWriter writes the status of policies, through the status
// subresource, by a merge patch, only when it changes. It runs where the
// controller runs (the leader in the lease mode; every replica in the
// redis and none modes). Each write is conditioned on the
// resourceVersion it was computed from, and computed by Desired from the
// status as read plus what this replica did (its Journal): replicas that
// write in turn keep each other's entries, and a conflict is computed
// again, never overwritten.
type StatusWriter struct {
	watcher    *Watcher
	client     client.Client
	needLeader bool
	log        logr.Logger
	queue      workqueue.TypedRateLimitingInterface[string]

	mu       sync.Mutex
	journals map[string]*Journal
}

// NewStatusWriter returns a StatusWriter of the policies w watches.
func NewStatusWriter(cfg *rest.Config, w *Watcher, needLeader bool, log logr.Logger) (*StatusWriter, error) {
	s, err := Scheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	return &StatusWriter{
		watcher: w, client: c, needLeader: needLeader, log: log,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "reloadpolicy-status"}),
		journals: map[string]*Journal{},
	}, nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (s *StatusWriter) NeedLeaderElection() bool { return s.needLeader }

// Start implements manager.Runnable: one worker until ctx is done.
func (s *StatusWriter) Start(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		s.queue.ShutDown()
	}()
	for s.next(ctx) {
	}
	return nil
}

// Enqueue asks for the status of the policy "namespace/name" to be
// written again.
func (s *StatusWriter) Enqueue(policy string) { s.queue.Add(policy) }

// Restarted notes that the workload k was restarted, for the policies
// that apply to it, because sources ("Kind/name") changed.
func (s *StatusWriter) Restarted(policies []*Policy, k workload.Key, at time.Time, sources []string) {
	s.note(policies, func(j *Journal) {
		j.Restarts = append(j.Restarts, v1alpha1.Restart{Kind: v1alpha1.TargetKind(k.Kind), Name: k.Name, At: metaTime(at), Sources: sources})
		delete(j.Held, k)
		j.Released[k] = true
	})
}

// Held notes that a window holds the restart of the workload k.
func (s *StatusWriter) Held(policies []*Policy, k workload.Key, now time.Time) {
	s.note(policies, func(j *Journal) {
		if _, ok := j.Held[k]; !ok {
			j.Held[k] = now
		}
		delete(j.Released, k)
	})
}

// Released notes that no window holds the workload k (anymore).
func (s *StatusWriter) Released(policies []*Policy, k workload.Key) {
	s.note(policies, func(j *Journal) {
		delete(j.Held, k)
		j.Released[k] = true
	})
}

func (s *StatusWriter) note(policies []*Policy, f func(*Journal)) {
	s.mu.Lock()
	for _, p := range policies {
		j := s.journals[p.Key()]
		if j == nil {
			j = &Journal{Held: map[workload.Key]time.Time{}, Released: map[workload.Key]bool{}}
			s.journals[p.Key()] = j
		}
		f(j)
	}
	s.mu.Unlock()
	for _, p := range policies {
		s.queue.Add(p.Key())
	}
}

func (s *StatusWriter) next(ctx context.Context) bool {
	key, quit := s.queue.Get()
	if quit {
		return false
	}
	defer s.queue.Done(key)
	retry, err := s.write(ctx, key)
	switch {
	case err != nil:
		if !apierrors.IsConflict(err) {
			metrics.Errors.WithLabelValues("status").Inc()
			s.log.Error(err, "Cannot write the status of a policy; retrying", "policy", key)
		}
		s.queue.AddRateLimited(key)
	case retry:
		s.queue.Forget(key)
		s.queue.AddAfter(key, notFoundRetry)
	default:
		s.queue.Forget(key)
	}
	return true
}

// write writes the status of the policy key if it changed; retry is true
// while sources or targets do not exist yet.
func (s *StatusWriter) write(ctx context.Context, key string) (retry bool, err error) {
	ns, name, _ := strings.Cut(key, "/")
	cur := s.watcher.Policy(ns, name)
	p := s.watcher.Index.Get(ns, name)
	if cur == nil || p == nil {
		s.mu.Lock()
		delete(s.journals, key)
		s.mu.Unlock()
		return false, nil
	}
	if p.Generation != cur.Generation {
		p = Compile(cur)
	}
	ready, err := Ready(p, s.watcher.Store)
	if err != nil {
		return false, err
	}
	selected, err := Selected(p, s.watcher.Store)
	if err != nil {
		return false, err
	}
	j := s.snapshot(key)
	desired := Desired(p, cur.Status, ready, j, selected)
	retry = ready.Reason == ReasonSourcesNotFound || ready.Reason == ReasonTargetsNotFound
	if Equal(desired, cur.Status) {
		s.applied(key, j)
		return retry, nil
	}
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": cur.ResourceVersion},
		"status": map[string]any{
			"observedGeneration": desired.ObservedGeneration,
			"conditions":         desired.Conditions,
			"pending":            orNil(desired.Pending),
			"lastRestarts":       orNil(desired.LastRestarts),
		},
	})
	if err != nil {
		return false, err
	}
	obj := &v1alpha1.ReloadPolicy{}
	obj.Namespace, obj.Name = ns, name
	if err := s.client.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, body)); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("patch status of reloadpolicy %s: %w", key, err)
	}
	s.applied(key, j)
	s.log.V(1).Info("Policy status written", "policy", key, "reason", ready.Reason)
	return retry, nil
}

// snapshot returns a copy of the journal of key.
func (s *StatusWriter) snapshot(key string) *Journal {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.journals[key]
	if j == nil {
		return nil
	}
	out := &Journal{Restarts: slices.Clone(j.Restarts), Held: map[workload.Key]time.Time{}, Released: map[workload.Key]bool{}}
	for k, v := range j.Held {
		out.Held[k] = v
	}
	for k, v := range j.Released {
		out.Released[k] = v
	}
	return out
}

// applied removes from the journal of key what snap held and the status
// now says. Restarts only grow, Held keeps its first time, and Released
// is level: a workload released again later is released again in the
// status, if it was held in between.
func (s *StatusWriter) applied(key string, snap *Journal) {
	if snap.empty() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.journals[key]
	if j == nil {
		return
	}
	j.Restarts = j.Restarts[min(len(snap.Restarts), len(j.Restarts)):]
	for k := range snap.Released {
		delete(j.Released, k)
	}
	if j.empty() {
		delete(s.journals, key)
	}
}

func orNil[T any](items []T) any {
	if len(items) == 0 {
		return nil
	}
	return items
}
