package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/api/v1alpha1"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/workload"
)

// The status of a policy whose sources or targets do not exist yet is
// looked at again (from the store: no API call unless it changed) after
// notFoundRetry, then twice as long each time it still finds them missing,
// up to maxNotFoundRetry. It starts again from notFoundRetry when the
// policy's spec changes (its generation; not for its status being
// written), or when a workload it applies to is adopted or records a new
// reference (a target or a source appeared: Decided). A re-check reads
// what the policy selects only while it lists pending restarts.
const (
	notFoundRetry    = 2 * time.Second
	maxNotFoundRetry = 5 * time.Minute
)

// selectionTTL is how long the writer reuses what it found of a
// namespace's workloads for the Ready condition (which target selects
// one): the statuses of 2,000 policies of 100 targets written (or looked
// at again) in one second cost one pass over the namespace's workloads
// per distinct selector, not one per policy. A target that appears is
// reported at most selectionTTL late, and looked at again then (its
// adoption restarts the wait: Decided).
const selectionTTL = time.Second

// StatusWriter writes the status of policies, through the status
// subresource, by a merge patch, only when it changes. It runs where the
// controller runs (the leader in the lease mode; every replica in the
// redis and none modes). Each write is conditioned on the
// resourceVersion it was computed from, and computed by Desired from the
// status as read plus what this replica did (its Journal): replicas that
// write in turn keep each other's entries, and a conflict is computed
// again, never overwritten.
type StatusWriter struct {
	// Pinning, when set, says whether pinned config revisions work
	// (nil) or why not, for the condition Pinned of a policy with
	// spec.pin; nil: watcher runs without --pinning.
	Pinning func(context.Context) error

	watcher    *Watcher
	client     client.Client
	needLeader bool
	log        logr.Logger
	queue      workqueue.TypedRateLimitingInterface[string]

	mu       sync.Mutex
	journals map[string]*Journal
	// retries counts, per policy, the re-checks in a row that found
	// sources or targets missing.
	retries map[string]retryState

	// selections are the recent selections of namespaces (selectionTTL);
	// only the worker uses them.
	selections map[string]recentSelection
}

// recentSelection is a selection of one namespace and when it began.
type recentSelection struct {
	sel   *selection
	began time.Time
}

// retryState counts the re-checks in a row of one policy, at one
// generation, that found sources or targets missing.
type retryState struct {
	n          int
	generation int64
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
		journals: map[string]*Journal{}, retries: map[string]retryState{},
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
// written again. (A wait for missing sources starts over when the
// policy's generation changes, not for its status being written.)
func (s *StatusWriter) Enqueue(policy string) { s.queue.Add(policy) }

// Decided tells the writer that the workload k, to which policies apply,
// was decided and the decision carried out: restart, a restart is still to
// be written (or is held); recorded, its record changed (it was adopted,
// or a reference was added: a target or a source of a policy may have
// appeared). Without a restart to write, nothing is pending for k; with a
// record changed, the policies waiting for missing sources or targets look
// again now.
func (s *StatusWriter) Decided(policies []*Policy, k workload.Key, restart, recorded bool) {
	if !restart {
		s.Released(policies, k)
	}
	if !recorded {
		return
	}
	var again []string
	s.mu.Lock()
	for _, p := range policies {
		if _, waiting := s.retries[p.Key()]; waiting {
			delete(s.retries, p.Key())
			again = append(again, p.Key())
		}
	}
	s.mu.Unlock()
	for _, key := range again {
		s.queue.Add(key)
	}
}

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

// Released notes that no window holds the workload k (anymore), for those
// of policies that list it as pending (in their status, or about to).
func (s *StatusWriter) Released(policies []*Policy, k workload.Key) {
	s.note(s.listing(policies, k), func(j *Journal) {
		delete(j.Held, k)
		j.Released[k] = true
	})
}

// listing returns the policies of ps that list k as pending: in the status
// the informer holds, or in their journal.
func (s *StatusWriter) listing(ps []*Policy, k workload.Key) []*Policy {
	var out []*Policy
	for _, p := range ps {
		s.mu.Lock()
		_, held := s.journals[p.Key()].held(k)
		s.mu.Unlock()
		if held || s.pending(p, k) {
			out = append(out, p)
		}
	}
	return out
}

// pending tells whether the status of p, as the informer holds it, lists
// k as pending.
func (s *StatusWriter) pending(p *Policy, k workload.Key) bool {
	cur := s.watcher.Policy(p.Namespace, p.Name)
	if cur == nil {
		return false
	}
	return slices.ContainsFunc(cur.Status.Pending, func(e v1alpha1.PendingRestart) bool {
		return string(e.Kind) == k.Kind && e.Name == k.Name
	})
}

func (s *StatusWriter) note(policies []*Policy, f func(*Journal)) {
	if len(policies) == 0 {
		return
	}
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

// pinned sets the condition Pinned of a policy with spec.pin (removes it
// from one without): True while pinned config revisions work, False with
// the reason PinningOff and why otherwise.
func (s *StatusWriter) pinned(ctx context.Context, p *Policy, st *v1alpha1.ReloadPolicyStatus) {
	if !p.Pin {
		meta.RemoveStatusCondition(&st.Conditions, ConditionPinned)
		return
	}
	c := metav1.Condition{Type: ConditionPinned, Status: metav1.ConditionTrue, Reason: ReasonPinned, ObservedGeneration: p.Generation,
		Message: "the targets' restarts pin their config"}
	err := errors.New("watcher runs without --pinning: the targets' restarts do not pin their config")
	if s.Pinning != nil {
		err = s.Pinning(ctx)
	}
	if err != nil {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonPinningOff, err.Error()
	}
	meta.SetStatusCondition(&st.Conditions, c)
}

func (s *StatusWriter) next(ctx context.Context) bool {
	key, quit := s.queue.Get()
	if quit {
		return false
	}
	defer s.queue.Done(key)
	retry, gen, err := s.write(ctx, key)
	switch {
	case err != nil:
		if !apierrors.IsConflict(err) {
			metrics.Errors.WithLabelValues("status").Inc()
			s.log.Error(err, "Cannot write the status of a policy; retrying", "policy", key)
		}
		s.queue.AddRateLimited(key)
	case retry:
		s.queue.Forget(key)
		s.queue.AddAfter(key, s.retry(key, gen))
	default:
		s.queue.Forget(key)
		s.mu.Lock()
		delete(s.retries, key)
		s.mu.Unlock()
	}
	return true
}

// retry returns when to look again at the policy key, at generation gen,
// whose sources or targets are still missing, and counts the re-check.
func (s *StatusWriter) retry(key string, gen int64) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.retries[key]
	if st.generation != gen {
		st = retryState{generation: gen}
	}
	d := backoff(st.n)
	st.n++
	s.retries[key] = st
	return d
}

// backoff returns the wait before re-check n (from 0) of a policy whose
// sources or targets are missing: notFoundRetry, doubled n times, at most
// maxNotFoundRetry.
func backoff(n int) time.Duration {
	d := notFoundRetry
	for i := 0; i < n && d < maxNotFoundRetry; i++ {
		d *= 2
	}
	return min(d, maxNotFoundRetry)
}

// write writes the status of the policy key if it changed; retry is true
// while sources or targets do not exist yet; gen is the generation of the
// policy it looked at.
func (s *StatusWriter) write(ctx context.Context, key string) (retry bool, gen int64, err error) {
	ns, name, _ := strings.Cut(key, "/")
	cur := s.watcher.Policy(ns, name)
	p := s.watcher.Index.Get(ns, name)
	if cur == nil || p == nil {
		s.mu.Lock()
		delete(s.journals, key)
		delete(s.retries, key)
		s.mu.Unlock()
		return false, 0, nil
	}
	if p.Generation != cur.Generation {
		p = Compile(cur)
	}
	gen = p.Generation
	ready, err := readyIn(p, s.watcher.Store, s.selection(ns))
	if err != nil {
		return false, gen, err
	}
	j := s.snapshot(key)
	var selected []workload.Key
	if len(cur.Status.Pending) > 0 || j != nil && len(j.Held) > 0 {
		// Only the pending entries need what the policy selects.
		if selected, err = Selected(p, s.watcher.Store); err != nil {
			return false, gen, err
		}
	}
	desired := Desired(p, cur.Status, ready, j, selected)
	s.pinned(ctx, p, &desired)
	retry = ready.Reason == ReasonSourcesNotFound || ready.Reason == ReasonTargetsNotFound
	if Equal(desired, cur.Status) {
		s.applied(key, j)
		return retry, gen, nil
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
		return false, gen, err
	}
	obj := &v1alpha1.ReloadPolicy{}
	obj.Namespace, obj.Name = ns, name
	if err := s.client.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, body)); err != nil {
		if apierrors.IsNotFound(err) {
			return false, gen, nil
		}
		return false, gen, fmt.Errorf("patch status of reloadpolicy %s: %w", key, err)
	}
	s.applied(key, j)
	s.log.V(1).Info("Policy status written", "policy", key, "reason", ready.Reason)
	return retry, gen, nil
}

// selection returns a selection of the workloads of namespace, begun at
// most selectionTTL ago.
func (s *StatusWriter) selection(namespace string) *selection {
	now := time.Now()
	if s.selections == nil {
		s.selections = map[string]recentSelection{}
	}
	for ns, r := range s.selections {
		if now.Sub(r.began) >= selectionTTL {
			delete(s.selections, ns)
		}
	}
	r, ok := s.selections[namespace]
	if !ok {
		r = recentSelection{sel: newSelection(namespace, s.watcher.Store), began: now}
		s.selections[namespace] = r
	}
	return r.sel
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
