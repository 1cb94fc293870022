package guard

import (
	"fmt"
	"slices"
	"time"

	"github.com/watcher-dev/watcher/internal/object"
)

// Producer is a controller writing one of a workload's sources that has
// not landed it yet (package producer judges them).
type Producer struct {
	// Object is the producer (an ExternalSecret, a Certificate...) and
	// Source what it produces.
	Object, Source object.Ref
	// Failed: the producer reports an error; otherwise it is still
	// writing.
	Failed bool
	// Message is the evidence, for a person; it names no Secret value.
	Message string
	// Polled: nothing tells of its progress; it is asked again every
	// pollProducers.
	Polled bool
}

// pollProducers is how often a restart waiting for a producer that nothing
// tells of is decided again.
const pollProducers = 15 * time.Second

// Producing holds the restart of a workload until every producer of its
// sources has landed what it is writing, so that the pods start with the
// whole change: a rotated credential synced by External Secrets, a
// certificate being issued. It keeps nothing; the wait is counted from
// the change set's opening (Request.Settle.Opened, kept on the workload).
//
//	the producers told            verdict
//	none                          admit
//	one failed                    hold (producer, a Warning) until it
//	                              recovers or a person releases it
//	some writing, before Timeout  hold (change-set) until Timeout; the
//	                              producer landing wakes it sooner
//	some writing, past Timeout    admit (OnTimeoutHold false: roll with
//	                              what has landed) or hold (producer)
//
// A release (Request.Released) admits whatever the producers say.
type Producing struct {
	// Timeout bounds the wait for producers still writing; 0: no bound.
	Timeout time.Duration
	// OnTimeoutHold holds, rather than rolls, a restart whose producers
	// are still writing at Timeout.
	OnTimeoutHold bool
}

// Check implements Gate.
func (p Producing) Check(r Request) Verdict {
	if len(r.Producers) == 0 || r.Released {
		return Verdict{}
	}
	for _, pr := range r.Producers {
		if pr.Failed {
			v := Verdict{Hold: true, Reason: ReasonProducer,
				Message: fmt.Sprintf("%s %s, which writes %s %s, reports an error: %s; held until it recovers or is released",
					pr.Object.Kind, pr.Object.Name, pr.Source.Kind, pr.Source.Name, pr.Message)}
			if pr.Polled {
				v.Until = r.Now.Add(pollProducers)
			}
			return v
		}
	}
	pr := r.Producers[0]
	opened := r.Settle.Opened
	if opened.IsZero() {
		opened = r.Now
	}
	if p.Timeout > 0 && !r.Now.Before(opened.Add(p.Timeout)) {
		if !p.OnTimeoutHold {
			return Verdict{}
		}
		return Verdict{Hold: true, Reason: ReasonProducer,
			Message: fmt.Sprintf("%s %s has not landed %s %s after %s (%s); held until it does or is released",
				pr.Object.Kind, pr.Object.Name, pr.Source.Kind, pr.Source.Name, short(p.Timeout), pr.Message)}
	}
	v := Verdict{Hold: true, Reason: ReasonChangeSet,
		Message: fmt.Sprintf("waiting for %s %s to land %s %s (%s)", pr.Object.Kind, pr.Object.Name, pr.Source.Kind, pr.Source.Name, pr.Message)}
	if n := len(r.Producers); n > 1 {
		v.Message += fmt.Sprintf(" and %d more", n-1)
	}
	if p.Timeout > 0 {
		v.Until = opened.Add(p.Timeout)
	}
	if slices.ContainsFunc(r.Producers, func(p Producer) bool { return p.Polled }) {
		if poll := r.Now.Add(pollProducers); v.Until.IsZero() || poll.Before(v.Until) {
			v.Until = poll
		}
	}
	return v
}

// TimedOut reports whether p admitted r only because its producers did
// not land within Timeout (the caller warns).
func (p Producing) TimedOut(r Request) bool {
	if len(r.Producers) == 0 || r.Released || p.Timeout <= 0 || p.OnTimeoutHold {
		return false
	}
	for _, pr := range r.Producers {
		if pr.Failed {
			return false
		}
	}
	opened := r.Settle.Opened
	return !opened.IsZero() && !r.Now.Before(opened.Add(p.Timeout))
}
