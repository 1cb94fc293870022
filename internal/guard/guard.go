// Package guard keeps watcher from restarting too much: a restart budget
// per workload, a hold on ConfigMaps and Secrets that keep changing
// (flapping), and rollouts in waves gated on the health of the rollouts
// already started. It is pure: no client, the clock passed in; the
// controller gathers, asks, and writes.
//
// # The hold seam
//
// Before a restart is written, the controller asks a Chain of Gates, in
// order. Each answers Admit, or Hold with a Reason, a time to look again
// (Until; zero: when something happens that the controller is told of, such
// as a rollout finishing or a person releasing the hold) and a message for
// people. The first hold wins. A held restart writes nothing: the
// workload's record stays behind its configuration, so the hold is
// level-triggered and survives a restart of watcher or a lease handover
// (the workload is decided again, and held again, from the cluster's
// state). The controller requeues the workload at Until, and says once
// that it is held (one log line, one Event, watcher_restarts_held and
// watcher_held_restarts_total by reason) and once that it is released.
//
//	gate            Reason          holds while                            released by
//	(window)        window          outside a maintenance window           the window opening (Until)
//	Settles         change-set      a changed source of the workload       the sources quiet for the
//	                                changed less than its quiet period     quiet period, or the maximum
//	                                ago (--settle, watcher.dev/settle)     from the first change (Until)
//	                pause-period    Reloader's pause period, counted from  the period ending (Until)
//	                                the first change
//	Producing       change-set      a producer of a source (an             the producer landing (the
//	                                ExternalSecret, a Certificate...) is   controller is told), or the
//	                                still writing                          timeout (then its policy)
//	                producer        a producer of a changed source         the producer recovering, a
//	                                reports an error (a failed producer    person (Request.Released), or
//	                                of an unchanged source holds nothing), the timeout (then its policy)
//	                                or the timeout passed with
//	                                OnTimeoutHold
//	Flaps           flapping        a changed source is flapping           quiet for --flap-quiet (Until),
//	                                                                       or a person (Request.Released)
//	Budget          budget          the workload restarted Max times       the oldest restart leaving
//	                                in the last Window                     the window (Until), or a person
//	FailedGate      failed-rollout  a rollout restarted for the same       the failed rollout finishing,
//	                                change (source and content) failed     or a person
//	Rollouts        wave            Max rollouts are in progress, or       a rollout finishing or failing,
//	                                others wait ahead in the wave (a       or the restart ahead asking
//	                                restart of its namespace with a lower  (or not within dueGrace)
//	                                priority number, waiting or due now)
//
// A gate is anything with Check(Request) Verdict. Adding one is one type
// and one entry in the chain package hold builds (hold.New: the gates of
// hold.Config.Gates, such as a ReloadPolicy's maintenance window, then
// Settles, Producing, Flaps, Budget, Rollouts.FailedGate and Rollouts); put it
// before the wave gate, which reserves a slot when it admits. A gate that
// keeps state about restarts implements Committer (told once the restart
// is written) and, if it reserves or queues something in Check, Canceller
// (told when another gate held or the write failed) or Deferrer (told,
// when another gate held it until a time, that it asks again then).
//
// Notifier is told of holds, releases, flapping sources and failed
// rollouts, for alerts; NopNotifier ignores them.
package guard

import (
	"time"

	"github.com/watcher-dev/watcher/internal/object"
)

// Reason says why a restart is held; the values are metric labels.
type Reason string

// The reasons of holds.
const (
	ReasonBudget        Reason = "budget"
	ReasonFlapping      Reason = "flapping"
	ReasonWave          Reason = "wave"
	ReasonFailedRollout Reason = "failed-rollout"
	ReasonWindow        Reason = "window"
	ReasonPausePeriod   Reason = "pause-period"
	ReasonChangeSet     Reason = "change-set"
	ReasonProducer      Reason = "producer"
)

// Reasons lists every Reason, for metrics.
var Reasons = []Reason{ReasonBudget, ReasonFlapping, ReasonWave, ReasonFailedRollout, ReasonWindow, ReasonPausePeriod, ReasonChangeSet, ReasonProducer}

// Source is a ConfigMap or Secret whose change causes a restart.
type Source struct {
	// Object names it.
	Object object.Ref
	// Sum is the digest of its content now: a change is a source and a
	// content.
	Sum string
	// Keys are the keys of it that changed, when known (names only; the
	// pending change set keeps them, the restart state does not).
	Keys []string
}

// Request is a restart to admit or hold.
type Request struct {
	// Workload names the workload to restart.
	Workload object.Ref
	// Priority orders restarts of one namespace within a wave, lower
	// first (PriorityAnnotation; hold.DefaultPriority when absent).
	Priority int
	// Sources are the changed ConfigMaps and Secrets, sorted.
	Sources []Source
	// Settle is the change set the restart waits for (Settles); zero:
	// none.
	Settle Settle
	// Producers are the producers of the workload's sources that have not
	// landed what they are writing (Producing); none: all have.
	Producers []Producer
	// Released is true when a person released the holds of this restart
	// (ReleaseAnnotation): the budget, flapping and failed-rollout gates
	// admit it.
	Released bool
	// History are the workload's earlier restarts as the cluster keeps
	// them (State.Times of its StateAnnotation, verified): the budget
	// counts them whichever replica wrote them.
	History []time.Time
	// Now is the time of the question.
	Now time.Time
	// Evict is true when the restart is made by eviction (State.Evict):
	// told by the caller once admitted, for the state it writes.
	Evict bool
}

// Verdict is a gate's answer.
type Verdict struct {
	// Hold is false when the gate admits the restart.
	Hold   bool
	Reason Reason
	// Until is when to ask again; zero when the controller is told.
	Until time.Time
	// Message says why, for a person: it names no Secret value.
	Message string
}

// Gate admits or holds a restart.
type Gate interface {
	Check(Request) Verdict
}

// Committer is a Gate told when a restart it admitted was written.
type Committer interface {
	Commit(Request)
}

// Canceller is a Gate told when a restart was not written: another gate
// held it, or the write failed. It gives up what it reserved or queued
// for the restart.
type Canceller interface {
	Cancel(Request)
}

// Chain asks its gates in order.
type Chain []Gate

// Deferrer is a Canceller told instead, when another gate held the
// restart until a known time (Verdict.Until): the restart asks again
// then. The wave (Rollouts) keeps its place in its namespace, so that
// restarts held together are admitted in priority order.
type Deferrer interface {
	Defer(r Request, until time.Time)
}

// Check returns the first hold, cancelling the restart in every other
// gate (deferring it, when the hold has an end and the gate is a
// Deferrer); or an admitting Verdict.
func (c Chain) Check(r Request) Verdict {
	for i, g := range c {
		if v := g.Check(r); v.Hold {
			c[:i].deferOrCancel(r, v.Until)
			c[i+1:].deferOrCancel(r, v.Until)
			return v
		}
	}
	return Verdict{}
}

// deferOrCancel tells every gate that the restart was held until until
// (zero: no known end).
func (c Chain) deferOrCancel(r Request, until time.Time) {
	for _, g := range c {
		if x, ok := g.(Deferrer); ok && !until.IsZero() {
			x.Defer(r, until)
		} else if x, ok := g.(Canceller); ok {
			x.Cancel(r)
		}
	}
}

// Commit tells every gate that the restart was written.
func (c Chain) Commit(r Request) {
	for _, g := range c {
		if x, ok := g.(Committer); ok {
			x.Commit(r)
		}
	}
}

// Cancel tells every gate that the restart was not written.
func (c Chain) Cancel(r Request) {
	for _, g := range c {
		if x, ok := g.(Canceller); ok {
			x.Cancel(r)
		}
	}
}

// Annotations read by the guards.
const (
	// PriorityAnnotation, on a workload, orders its restart within its
	// namespace in a wave: an integer, lower first (parsed and bounded by
	// hold.Priority); it never orders restarts across namespaces.
	PriorityAnnotation = "watcher.dev/restart-priority"
	// ReleaseAnnotation, on a workload, a ConfigMap or a Secret, releases
	// the holds in place (budget, flapping, failed rollout): set it to a
	// new value (kubectl annotate --overwrite ... watcher.dev/release-held=$(date +%s)).
	ReleaseAnnotation = "watcher.dev/release-held"
)

// Event is what a Notifier is told.
type Event struct {
	Type EventType
	// Workload names the workload, if any.
	Workload object.Ref
	// Source names the ConfigMap or Secret, if any.
	Source object.Ref
	// Reason of a hold or release.
	Reason Reason
	// Message is the text of the Kubernetes Event.
	Message string
	Time    time.Time
}

// EventType is the kind of an Event.
type EventType string

// The types of events.
const (
	EventHeld          EventType = "held"
	EventReleased      EventType = "released"
	EventFlapping      EventType = "flapping"
	EventRolloutFailed EventType = "rollout-failed"
)

// Notifier is told what the guards do, for alerts. Notify must not block.
type Notifier interface {
	Notify(Event)
}

// NopNotifier ignores every Event.
type NopNotifier struct{}

// Notify implements Notifier.
func (NopNotifier) Notify(Event) {}
