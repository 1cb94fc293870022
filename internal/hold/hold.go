// Package hold wraps the pure restart guards of package guard with what
// they need at run time: the state of the holds, the timers that wake held
// workloads, the Events, the metrics and the notifications. The controller
// asks Admit before a restart and calls Done after the write; it tells
// Observe of every workload it reconciles, and whether it is restarted by
// eviction, and ConfigChanged of every update of a ConfigMap or Secret;
// the workloads to decide again come out of Wakes. Nothing else of the
// controller is known here.
package hold

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/note"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/packed"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/producer"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/verdict"
)

// Config sets the guards against restart storms (see package guard).
// The zero value turns every guard off.
type Config struct {
	// Budget restarts of one workload per BudgetWindow; 0: no limit.
	Budget       int
	BudgetWindow time.Duration
	// FlapThreshold changes per FlapWindow make a source flapping, until
	// it is quiet for FlapQuiet; 0: off.
	FlapThreshold         int
	FlapWindow, FlapQuiet time.Duration
	// MaxConcurrent rollouts in progress; 0: no limit.
	MaxConcurrent int
	// RolloutTimeout: a rollout not done by then has failed; 0: never.
	RolloutTimeout time.Duration
	// HoldOnFailure holds the other restarts of a failed rollout's change.
	HoldOnFailure bool
	// Settle is how long a workload's changed sources must have been
	// quiet before it restarts, and SettleMax bounds that wait from the
	// first change (guard.Settles); a workload's watcher.dev/settle and
	// watcher.dev/settle-max, or Reloader's pause period, set its own.
	// 0: none.
	Settle, SettleMax time.Duration
	// Producers judges the producers of a workload's sources (package
	// producer): its restart waits until each has landed what it is
	// writing (guard.Producing), at most ProducerTimeout (0: no bound),
	// then rolls, or holds if ProducerTimeoutHold. Nil: none is waited for.
	Producers           *producer.Follower
	ProducerTimeout     time.Duration
	ProducerTimeoutHold bool
	// Gates are asked before watcher's own (a maintenance window, say).
	Gates []guard.Gate
	// Notifier is told of holds, releases, flapping and failed rollouts;
	// nil: guard.NopNotifier.
	Notifier guard.Notifier
	// Shared is true when several replicas act at once (the redis and none
	// modes): a failed rollout another replica started is held for, but
	// reported only by the replica that started it.
	Shared bool
	// Sign signs the guards' state kept on workloads
	// (guard.StateAnnotation) with the installation's key; nil: no state
	// is written or trusted.
	Sign guard.Signer
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// Known reports whether every optional kind of workload the API
	// server serves was looked up (its informers then run in the store),
	// so that restore waits for them; nil: at once.
	Known func() bool
}

// Event reasons of the guards.
const (
	ReasonRestartHeld     = "RestartHeld"
	ReasonRestartWaiting  = "RestartWaiting"
	ReasonFlapping        = "Flapping"
	ReasonRolloutFailed   = "RolloutFailed"
	ReasonRolloutResumed  = "RolloutRecovered"
	ReasonRestartReleased = "RestartReleased"
	// ReasonWaitingLong: a restart waited for a wave slot longer than the
	// rollout timeout (watcher_wave_wait_seconds has them all).
	ReasonWaitingLong = "RestartWaitingLong"
)

// Guards asks the chain of gates before every restart, remembers the
// restarts it holds, and wakes them (through Wakes) when their hold can
// end. A nil *Guards admits everything.
type Guards struct {
	cfg      Config
	store    Workloads
	recorder recorder.EventRecorder
	notifier guard.Notifier
	now      func() time.Time

	budget    *guard.Budget
	producing guard.Producing
	flaps     *guard.Flaps
	rollouts  *guard.Rollouts
	chain     guard.Chain

	// wake carries the workloads to decide again into the work queue.
	wake chan event.TypedGenericEvent[object.Ref]

	// restoring holds what restore knows of the kinds whose workloads
	// were observed (restore.go).
	restoring restoring

	mu      sync.Mutex
	ctx     context.Context // the sweeper's, for the timers
	held    map[object.Ref]hold
	waiting map[object.Ref]bool // restarts waiting for restore
	timers  map[object.Ref]*time.Timer
	release map[object.Ref]string // ReleaseAnnotation last seen on failed workloads
	// warned are the failed producers (and sources) the pending restart
	// of a workload does not wait for, said once (unwaited).
	warned map[object.Ref][]string
}

// hold is a restart held now.
type hold struct {
	reason guard.Reason
	since  time.Time
	// release holds the release annotations of the workload and of its
	// changed sources when the hold began, per object: a new non-empty
	// value on one of them releases it.
	release map[object.Ref]string
	// released: a person released it, and a gate that a release does not
	// lift (the wave) holds it now.
	released bool
	// sources are the changed ConfigMaps and Secrets the held restart is
	// for: a release on one of them wakes it (wakeFor).
	sources []object.Ref
	// setSince is when it began to wait for its change set (by any gate
	// since); zero: it did not.
	setSince time.Time
}

// Workloads is what the guards read of the workloads, from the
// controller's store (store.Store): at start, once a kind's informers
// have synced, the workloads of that kind, to restore the guards' state
// kept on them (restore.go); and a workload to say an Event on. What a
// decision needs is handed to Admit (Facts): no ConfigMap or Secret is
// read here.
type Workloads interface {
	Informers(kind string) []toolscache.SharedIndexInformer
	Workloads(kind, namespace string) ([]*packed.Object, error)
	Get(kind, namespace, name string) (*metav1.PartialObjectMetadata, error)
}

// New returns the guards of cfg, reading the workloads from st (nil: no
// restore, no Events on workloads) and saying Events on rec.
func New(cfg Config, st Workloads, rec recorder.EventRecorder) *Guards {
	g := &Guards{cfg: cfg, store: st, recorder: rec, notifier: cfg.Notifier, now: cfg.Now,
		budget:    guard.NewBudget(cfg.Budget, cfg.BudgetWindow),
		producing: guard.Producing{Timeout: cfg.ProducerTimeout, OnTimeoutHold: cfg.ProducerTimeoutHold},
		flaps:     guard.NewFlaps(cfg.FlapThreshold, cfg.FlapWindow, cfg.FlapQuiet),
		rollouts:  guard.NewRollouts(cfg.MaxConcurrent, cfg.RolloutTimeout, cfg.HoldOnFailure),
		wake:      make(chan event.TypedGenericEvent[object.Ref], 1024),
		held:      map[object.Ref]hold{}, waiting: map[object.Ref]bool{}, timers: map[object.Ref]*time.Timer{}, release: map[object.Ref]string{},
		warned: map[object.Ref][]string{},
	}
	if g.notifier == nil {
		g.notifier = guard.NopNotifier{}
	}
	if g.now == nil {
		g.now = time.Now
	}
	// The order of the hold seam (see package guard): the gates of others
	// (maintenance windows), change sets (and pause periods), then flapping, budget, failed rollouts, and
	// the wave last, as it reserves a slot when it admits.
	g.rollouts.Waited = func(d time.Duration) { metrics.WaveWait.Observe(d.Seconds()) }
	g.chain = append(slices.Clone(cfg.Gates), guard.Settles{}, g.producing, g.flaps, g.budget, g.rollouts.FailedGate(), g.rollouts)
	for _, r := range guard.Reasons {
		metrics.RestartsHeld.WithLabelValues(string(r))
		metrics.HeldRestarts.WithLabelValues(string(r))
	}
	return g
}

// Settle is a workload's settle set by the ReloadPolicies that apply to it
// (zero: the installation's); its own annotations still win.
type Settle struct{ Quiet, Max time.Duration }

// Facts are what the guards are told of a workload besides its plan,
// gathered once by the caller: its policies' settle and the facts of the
// ConfigMaps and Secrets it reads (verdict.Facts.Sources, by
// refs.Ref.ID). The guards read no ConfigMap or Secret themselves.
type Facts struct {
	Settle  Settle
	Sources map[string]verdict.Source
}

// Admit asks the gates whether key (obj), whose plan p restarts it, may
// restart now. When it may not, the restart is held: reported once, and
// the workload woken when the hold can end. Until the guards' state kept
// on the workloads of every kind is restored (restore), it waits,
// silently. The caller writes the restart only if ok, then calls Done.
func (g *Guards) Admit(ctx context.Context, key object.Ref, obj client.Object, p plan.Plan, f Facts, report func(error)) (req guard.Request, ok bool) {
	if g == nil {
		return guard.Request{}, true
	}
	if g.restore(ctx) {
		g.waitRestore(ctx, key)
		return guard.Request{}, false
	}
	req = g.request(ctx, key, obj, p, f, report)
	values := g.releaseValues(key, obj, req.Sources, f.Sources)
	g.mu.Lock()
	h, wasHeld := g.held[key]
	delete(g.waiting, key)
	g.mu.Unlock()
	req.Released = wasHeld && (h.released || releasedSince(h.release, values))
	v := g.chain.Check(req)
	g.unwaited(key, obj, req)
	if !v.Hold {
		if g.producing.TimedOut(req) {
			g.producerTimedOut(obj, req)
		}
		if len(req.Settle.Lagging) > 0 {
			g.incomplete(obj, req)
		}
		return req, true
	}
	g.held1(ctx, key, obj, req, v, values)
	return req, false
}

// Done ends an admitted restart: written (err nil; obj is then the
// workload as the write left it) or not.
func (g *Guards) Done(ctx context.Context, key object.Ref, obj client.Object, req guard.Request, err error) {
	if g == nil {
		return
	}
	if err != nil {
		g.chain.Cancel(req)
		return
	}
	g.rollouts.Wrote(key, obj.GetGeneration())
	g.chain.Commit(req)
	g.mu.Lock()
	h, held := g.held[key]
	g.mu.Unlock()
	if held && !h.setSince.IsZero() {
		g.completed(obj, req, h.setSince)
	}
	var last time.Time
	for _, s := range req.Sources {
		if t, ok := g.flaps.LastChange(s.Object); ok && t.After(last) {
			last = t
		}
	}
	if !last.IsZero() {
		metrics.ReactionSeconds.Observe(req.Now.Sub(last).Seconds())
	}
	n := 1
	for _, t := range req.History {
		if req.Now.Sub(t) < max(req.Settle.Max, g.cfg.SettleMax) && t.Before(req.Now) {
			n++
		}
	}
	metrics.RolloutsPerChange.Observe(float64(n))
	g.unhold(ctx, key, "restarted")
}

// Settled says that key needs no restart (any more).
func (g *Guards) Settled(ctx context.Context, key object.Ref) {
	if g == nil {
		return
	}
	g.rollouts.Forget(key)
	g.unhold(ctx, key, "no restart needed")
}

// request gathers what the gates need about a restart.
func (g *Guards) request(ctx context.Context, key object.Ref, obj client.Object, p plan.Plan, f Facts, report func(error)) guard.Request {
	req := guard.Request{Workload: key, Now: g.now()}
	if st, ok := g.state(obj); ok {
		req.History = st.Times
	}
	prio, err := Priority(obj)
	if err != nil {
		report(err)
	}
	req.Priority = prio
	for _, c := range p.Changes {
		id := object.Ref{Kind: string(c.Ref.Kind), Namespace: key.Namespace, Name: c.Ref.Name}
		sum := "gone"
		if s := f.Sources[c.Ref.ID()]; s.Present && s.Sum != "" {
			sum = s.Sum
		} else if c.Ref.Kind != refs.ConfigMap && c.Ref.Kind != refs.Secret {
			sum = c.New // a SecretProviderClass (package csi): no ConfigMap or Secret
		}
		req.Sources = append(req.Sources, guard.Source{Object: id, Sum: sum, Keys: c.Keys})
	}
	req.Settle = g.settle(obj, f.Settle, req, report)
	changeSets(&req.Settle, key, obj, p, f.Sources)
	req.Producers = g.producers(ctx, key, obj, p, &req, report)
	return req
}

// releaseValues returns the release annotations of obj (the workload key)
// and of the sources, per object, as facts holds them.
func (g *Guards) releaseValues(key object.Ref, obj client.Object, sources []guard.Source, facts map[string]verdict.Source) map[object.Ref]string {
	out := map[object.Ref]string{key: obj.GetAnnotations()[guard.ReleaseAnnotation]}
	for _, s := range sources {
		if f, ok := facts[s.Object.Kind+"/"+s.Object.Name]; ok && f.Present {
			out[s.Object] = f.Release
		}
	}
	return out
}

// releasedSince reports whether a person released a hold that began with
// the release annotations was: one of those objects has a new non-empty
// value now. Objects that joined or left the change since say nothing.
func releasedSince(was, now map[object.Ref]string) bool {
	for ref, v := range was {
		if cur, ok := now[ref]; ok && cur != "" && cur != v {
			return true
		}
	}
	return false
}

// State returns the value of guard.StateAnnotation to write with the
// restart req of obj, admitted by Admit; "" when no state is kept.
func (g *Guards) State(req guard.Request, obj client.Object) string {
	if g == nil || g.cfg.Sign == nil {
		return ""
	}
	st := guard.State{At: req.Now, Generation: obj.GetGeneration() + 1, Times: g.budget.Times(req), Sources: req.Sources, Evict: req.Evict}
	return st.Encode(string(obj.GetUID()), g.cfg.Sign)
}

// RestartedAt returns when watcher last restarted obj, from the state kept
// on it (guard.StateAnnotation, to the second), if it is watcher's own:
// the evict strategy replaces the pods created before it.
func (g *Guards) RestartedAt(obj client.Object) (time.Time, bool) {
	if g == nil {
		return time.Time{}, false
	}
	st, ok := g.state(obj)
	return st.At, ok
}

// state reads the guards' state kept on obj, if it is watcher's own.
func (g *Guards) state(obj client.Object) (guard.State, bool) {
	v, ok := obj.GetAnnotations()[guard.StateAnnotation]
	if !ok || g.cfg.Sign == nil {
		return guard.State{}, false
	}
	st, err := guard.DecodeState(v, string(obj.GetUID()), g.cfg.Sign)
	return st, err == nil
}

// held1 records a hold, reports it if it is new (or its reason changed),
// and wakes the workload when it can end.
func (g *Guards) held1(ctx context.Context, key object.Ref, obj client.Object, req guard.Request, v guard.Verdict, values map[object.Ref]string) {
	g.mu.Lock()
	h, was := g.held[key]
	fresh := !was || h.reason != v.Reason
	switch {
	case fresh:
		setSince := h.setSince
		if v.Reason == guard.ReasonChangeSet || v.Reason == guard.ReasonPausePeriod {
			setSince = cmp.Or(setSince, req.Now)
		}
		h := hold{reason: v.Reason, since: req.Now, release: values, released: req.Released, setSince: setSince}
		for _, s := range req.Sources {
			h.sources = append(h.sources, s.Object)
		}
		g.held[key] = h
	case req.Released && !h.released:
		// Released by a person, held now by a gate a release does not
		// lift: the values it was released with are the new baseline.
		h.release, h.released = values, true
		g.held[key] = h
	}
	g.mu.Unlock()
	if !v.Until.IsZero() {
		g.wakeAt(ctx, key, v.Until)
	}
	if !fresh {
		return
	}
	log := ctrl.LoggerFrom(ctx)
	if was {
		metrics.RestartsHeld.WithLabelValues(string(h.reason)).Dec()
	}
	metrics.RestartsHeld.WithLabelValues(string(v.Reason)).Inc()
	metrics.HeldRestarts.WithLabelValues(string(v.Reason)).Inc()
	log.Info("Restart held", "reason", v.Reason, "until", until(v.Until), "why", v.Message)
	kind, why := corev1.EventTypeWarning, ReasonRestartHeld
	switch v.Reason {
	case guard.ReasonWave, guard.ReasonPausePeriod: // waiting is what was asked for, not a problem
		kind, why = corev1.EventTypeNormal, ReasonRestartWaiting
	case guard.ReasonChangeSet:
		kind, why = corev1.EventTypeNormal, ReasonChangeSetOpen
	}
	g.recorder.Eventf(obj, nil, kind, why, "Restart", "%s", note.Truncate("Restart held ("+string(v.Reason)+"): "+v.Message))
	g.notifier.Notify(guard.Event{Type: guard.EventHeld, Workload: key, Reason: v.Reason, Message: v.Message, Time: req.Now})
}

// unhold ends the hold of key, if any, saying why.
func (g *Guards) unhold(ctx context.Context, key object.Ref, why string) {
	g.mu.Lock()
	h, was := g.held[key]
	delete(g.held, key)
	delete(g.waiting, key)
	delete(g.warned, key)
	if t := g.timers[key]; t != nil {
		t.Stop()
		delete(g.timers, key)
	}
	g.mu.Unlock()
	if !was {
		return
	}
	metrics.RestartsHeld.WithLabelValues(string(h.reason)).Dec()
	held := g.now().Sub(h.since).Round(time.Millisecond)
	ctrl.LoggerFrom(ctx).Info("Held restart released", "reason", h.reason, "heldFor", held.String(), "because", why)
	g.notifier.Notify(guard.Event{Type: guard.EventReleased, Workload: key, Reason: h.reason, Message: why, Time: g.now()})
}

func until(t time.Time) string {
	if t.IsZero() {
		return "released"
	}
	return t.UTC().Format(time.RFC3339)
}

// Priority reads guard.PriorityAnnotation of a workload: its restart's
// order within its namespace's wave, lower first. Without the annotation,
// or with one that is not an integer in [-1000, 1000] (reported as the
// error), it is DefaultPriority, after every workload that has one.
func Priority(obj client.Object) (int, error) {
	s, ok := obj.GetAnnotations()[guard.PriorityAnnotation]
	if !ok {
		return DefaultPriority, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < -MaxPriority || n > MaxPriority {
		return DefaultPriority, fmt.Errorf("invalid %s %.40q: want an integer from %d to %d; ordered after the workloads that have one",
			guard.PriorityAnnotation, s, -MaxPriority, MaxPriority)
	}
	return n, nil
}

// MaxPriority bounds guard.PriorityAnnotation both ways. The priority
// orders restarts only within a namespace, so its range need only be
// wide enough for one team's workloads.
const MaxPriority = 1000

// DefaultPriority is the priority of a workload without the annotation.
const DefaultPriority = MaxPriority + 1

// InWaveOrder sorts the workloads a change restarts as the wave starts
// them: by namespace, then by Priority (get reads a workload; nil: none),
// then name and kind.
func InWaveOrder(keys []object.Ref, get func(object.Ref) client.Object) []object.Ref {
	prio := make(map[object.Ref]int, len(keys))
	for _, k := range keys {
		prio[k] = DefaultPriority
		if o := get(k); o != nil {
			prio[k], _ = Priority(o)
		}
	}
	slices.SortStableFunc(keys, func(a, b object.Ref) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(prio[a], prio[b]), object.Compare(a, b))
	})
	return keys
}

// Holding reports whether a restart of key is held now, or waits for
// the guards' state of a kind to be restored.
func (g *Guards) Holding(key object.Ref) bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.held[key]
	return ok || g.waiting[key]
}
