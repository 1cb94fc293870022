package controller

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/store"
	"github.com/watcher-dev/watcher/internal/workload"
)

// GuardConfig sets the guards against restart storms (see package guard).
// The zero value turns every guard off.
type GuardConfig struct {
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
	// Gates are asked before watcher's own (a maintenance window, say).
	Gates []guard.Gate
	// Notifier is told of holds, releases, flapping and failed rollouts;
	// nil: guard.NopNotifier.
	Notifier guard.Notifier
	// Shared is true when several replicas act at once (the redis and none
	// modes): a failed rollout another replica started is held for, but
	// reported only by the replica that started it.
	Shared bool
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Event reasons of the guards.
const (
	ReasonRestartHeld     = "RestartHeld"
	ReasonRestartWaiting  = "RestartWaiting"
	ReasonFlapping        = "Flapping"
	ReasonRolloutFailed   = "RolloutFailed"
	ReasonRolloutResumed  = "RolloutRecovered"
	ReasonRestartReleased = "RestartReleased"
)

// guards asks the chain of gates before every restart, remembers the
// restarts it holds, and wakes them (through the work queue) when their
// hold can end. A nil *guards admits everything.
type guards struct {
	cfg      GuardConfig
	store    *store.Store
	recorder recorder.EventRecorder
	notifier guard.Notifier
	now      func() time.Time

	budget   *guard.Budget
	flaps    *guard.Flaps
	rollouts *guard.Rollouts
	chain    guard.Chain

	// wake carries the workloads to decide again into the work queue.
	wake chan event.TypedGenericEvent[Request]

	mu      sync.Mutex
	ctx     context.Context // the sweeper's, for the timers
	held    map[workload.Key]hold
	timers  map[workload.Key]*time.Timer
	release map[workload.Key]string // ReleaseAnnotation last seen on failed workloads
}

// hold is a restart held now.
type hold struct {
	reason guard.Reason
	since  time.Time
	// token is the release annotations of the workload and its sources
	// when the hold began: a new value releases it.
	token string
	// released: a person released it, and a gate that a release does not
	// lift (the wave) holds it now.
	released bool
}

func newGuards(cfg GuardConfig, st *store.Store, rec recorder.EventRecorder) *guards {
	g := &guards{cfg: cfg, store: st, recorder: rec, notifier: cfg.Notifier, now: cfg.Now,
		budget:   guard.NewBudget(cfg.Budget, cfg.BudgetWindow),
		flaps:    guard.NewFlaps(cfg.FlapThreshold, cfg.FlapWindow, cfg.FlapQuiet),
		rollouts: guard.NewRollouts(cfg.MaxConcurrent, cfg.RolloutTimeout, cfg.HoldOnFailure),
		wake:     make(chan event.TypedGenericEvent[Request], 1024),
		held:     map[workload.Key]hold{}, timers: map[workload.Key]*time.Timer{}, release: map[workload.Key]string{},
	}
	if g.notifier == nil {
		g.notifier = guard.NopNotifier{}
	}
	if g.now == nil {
		g.now = time.Now
	}
	// The order of the hold seam (see package guard): the gates of others
	// (maintenance windows), then flapping, budget, failed rollouts, and
	// the wave last, as it reserves a slot when it admits.
	g.chain = append(slices.Clone(cfg.Gates), g.flaps, g.budget, g.rollouts.FailedGate(), g.rollouts)
	for _, r := range guard.Reasons {
		metrics.RestartsHeld.WithLabelValues(string(r))
		metrics.HeldRestarts.WithLabelValues(string(r))
	}
	return g
}

// gate asks the guards before a restart of key by p, unless p restarts
// nothing (then any hold of key ends) or the workload's pods roll only
// when deleted (onDelete: no rollout to guard). gated says whether done
// must be called after the write; ok whether to write.
func (r *Reconciler) gate(ctx context.Context, key workload.Key, obj client.Object, p plan.Plan, onDelete string) (req guard.Request, gated, ok bool) {
	if p.Action != plan.Restart || onDelete != "" {
		r.guards.settled(ctx, key)
		return guard.Request{}, false, true
	}
	req, ok = r.guards.admit(ctx, key, obj, p, func(err error) { r.invalidAnnotation(ctx, obj, err) })
	return req, true, ok
}

// admit asks the gates whether key, whose plan p restarts it, may restart
// now. When it may not, the restart is held: reported once, and the
// workload woken when the hold can end. The caller writes the restart only
// if ok, then calls done.
func (g *guards) admit(ctx context.Context, key workload.Key, obj client.Object, p plan.Plan, report func(error)) (req guard.Request, ok bool) {
	if g == nil {
		return guard.Request{}, true
	}
	req = g.request(key, obj, p, report)
	token := g.token(obj, req.Sources)
	g.mu.Lock()
	h, wasHeld := g.held[key]
	g.mu.Unlock()
	req.Released = wasHeld && (h.released || h.token != token)
	v := g.chain.Check(req)
	if !v.Hold {
		return req, true
	}
	g.held1(ctx, key, obj, req, v, token)
	return req, false
}

// done ends an admitted restart: written (err nil; obj is then the
// workload as the write left it) or not.
func (g *guards) done(ctx context.Context, key workload.Key, obj client.Object, req guard.Request, err error) {
	if g == nil {
		return
	}
	if err != nil {
		g.chain.Cancel(req)
		return
	}
	g.rollouts.Wrote(key.String(), obj.GetGeneration())
	g.chain.Commit(req)
	var last time.Time
	for _, s := range req.Sources {
		if t, ok := g.flaps.LastChange(s.ID); ok && t.After(last) {
			last = t
		}
	}
	if !last.IsZero() {
		metrics.ReactionSeconds.Observe(req.Now.Sub(last).Seconds())
	}
	g.unhold(ctx, key, "restarted")
}

// settled says that key needs no restart (any more).
func (g *guards) settled(ctx context.Context, key workload.Key) {
	if g == nil {
		return
	}
	g.rollouts.Forget(key.String())
	g.unhold(ctx, key, "no restart needed")
}

// request gathers what the gates need about a restart.
func (g *guards) request(key workload.Key, obj client.Object, p plan.Plan, report func(error)) guard.Request {
	req := guard.Request{Key: key.String(), Kind: key.Kind, Namespace: key.Namespace, Name: key.Name,
		Priority: math.MaxInt32, Now: g.now()}
	if s, ok := obj.GetAnnotations()[guard.PriorityAnnotation]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < math.MinInt32 || n >= math.MaxInt32 {
			report(invalidPriority{s})
		} else {
			req.Priority = n
		}
	}
	for _, c := range p.Changes {
		id := describe(key.Namespace, c.Ref)
		sum := "gone"
		if o, err := g.store.Get(string(c.Ref.Kind), key.Namespace, c.Ref.Name); err == nil && o != nil {
			if d, err := hash.FromObject(o); err == nil {
				sum = d.Sum
			}
		}
		req.Sources = append(req.Sources, guard.Source{ID: id, Sum: sum})
	}
	return req
}

type invalidPriority struct{ value string }

func (e invalidPriority) Error() string {
	return "invalid " + guard.PriorityAnnotation + " " + strconv.Quote(e.value) + ": want an integer; ordered after the workloads that have one"
}

// token joins the release annotations of obj and of the sources.
func (g *guards) token(obj client.Object, sources []guard.Source) string {
	parts := []string{obj.GetAnnotations()[guard.ReleaseAnnotation]}
	for _, s := range sources {
		kind, rest, _ := strings.Cut(s.ID, " ")
		ns, name, _ := strings.Cut(rest, "/")
		if o, err := g.store.Get(kind, ns, name); err == nil && o != nil {
			parts = append(parts, o.GetAnnotations()[guard.ReleaseAnnotation])
		}
	}
	return strings.Join(parts, "\x00")
}

// held1 records a hold, reports it if it is new (or its reason changed),
// and wakes the workload when it can end.
func (g *guards) held1(ctx context.Context, key workload.Key, obj client.Object, req guard.Request, v guard.Verdict, token string) {
	g.mu.Lock()
	h, was := g.held[key]
	fresh := !was || h.reason != v.Reason
	if fresh {
		g.held[key] = hold{reason: v.Reason, since: req.Now, token: token, released: req.Released}
	} else if h.token != token || req.Released != h.released {
		h.token, h.released = token, req.Released
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
	if v.Reason == guard.ReasonWave { // waiting in a wave is the design, not a problem
		kind, why = corev1.EventTypeNormal, ReasonRestartWaiting
	}
	g.recorder.Eventf(obj, nil, kind, why, "Restart", "%s", truncate("Restart held ("+string(v.Reason)+"): "+v.Message))
	g.notifier.Notify(guard.Event{Type: guard.EventHeld, Workload: key.String(), Reason: v.Reason, Message: v.Message, Time: req.Now})
}

// unhold ends the hold of key, if any, saying why.
func (g *guards) unhold(ctx context.Context, key workload.Key, why string) {
	g.mu.Lock()
	h, was := g.held[key]
	delete(g.held, key)
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
	g.notifier.Notify(guard.Event{Type: guard.EventReleased, Workload: key.String(), Reason: h.reason, Message: why, Time: g.now()})
}

// wakeAt decides key again at t.
func (g *guards) wakeAt(ctx context.Context, key workload.Key, t time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if old := g.timers[key]; old != nil {
		old.Stop()
	}
	base := g.ctx
	if base == nil {
		base = ctx
	}
	g.timers[key] = time.AfterFunc(max(t.Sub(g.now()), 0)+10*time.Millisecond, func() {
		g.mu.Lock()
		delete(g.timers, key)
		g.mu.Unlock()
		g.wakeNow(base, key)
	})
}

// wakeNow decides key again as soon as a worker is free.
func (g *guards) wakeNow(ctx context.Context, key workload.Key) {
	e := event.TypedGenericEvent[Request]{Object: Request{Kind: key.Kind, Namespace: key.Namespace, Name: key.Name}}
	select {
	case g.wake <- e:
	default:
		go func() {
			select {
			case g.wake <- e:
			case <-ctx.Done():
			}
		}()
	}
}

// wakeHeld decides again every workload held for one of reasons.
func (g *guards) wakeHeld(ctx context.Context, reasons ...guard.Reason) {
	g.mu.Lock()
	var keys []workload.Key
	for k, h := range g.held {
		if slices.Contains(reasons, h.reason) {
			keys = append(keys, k)
		}
	}
	g.mu.Unlock()
	for _, k := range keys {
		g.wakeNow(ctx, k)
	}
}

func until(t time.Time) string {
	if t.IsZero() {
		return "released"
	}
	return t.UTC().Format(time.RFC3339)
}

// guardConfig reads the guards' settings from the options.
func guardConfig(o *options.Options) GuardConfig {
	return GuardConfig{
		Budget: o.RestartBudget.Count, BudgetWindow: o.RestartBudget.Per,
		FlapThreshold: o.FlapThreshold.Count, FlapWindow: o.FlapThreshold.Per, FlapQuiet: o.FlapQuiet,
		MaxConcurrent:  o.MaxConcurrentRollouts,
		RolloutTimeout: o.RolloutTimeout,
		HoldOnFailure:  o.OnFailedRollout == options.OnFailedHold,
		Shared:         o.Lock != options.LockLease,
	}
}

// inWaveOrder sorts the workloads a change restarts as the wave starts
// them: by guard.PriorityAnnotation, then namespace and name.
func (r *Reconciler) inWaveOrder(keys []workload.Key) []workload.Key {
	prio := make(map[workload.Key]int, len(keys))
	for _, k := range keys {
		prio[k] = math.MaxInt32
		if o, err := r.Store.Get(k.Kind, k.Namespace, k.Name); err == nil && o != nil {
			if n, err := strconv.Atoi(strings.TrimSpace(o.GetAnnotations()[guard.PriorityAnnotation])); err == nil {
				prio[k] = n
			}
		}
	}
	slices.SortStableFunc(keys, func(a, b workload.Key) int {
		return cmp.Or(cmp.Compare(prio[a], prio[b]), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Kind, b.Kind))
	})
	return keys
}
