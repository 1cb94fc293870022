package guard

import (
	"cmp"
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
// the change set's opening (Request.Settle.Opened, kept on the workload),
// and every wait is bounded by Timeout, unless Timeout is 0 or
// OnTimeoutHold is set (the operator's explicit choice to wait for ever).
//
//	the producers told                     verdict
//	none                                   admit
//	failed, of a source the restart does   admit: not waited for (the pods read the
//	not change                             same content either way); Ignored lists
//	                                       them, and the caller warns
//	failed, of a changed source, before    hold (producer, a Warning) until Timeout;
//	Timeout                                its recovery wakes it sooner
//	writing, before Timeout                hold (change-set) until Timeout; the
//	                                       producer landing wakes it sooner
//	failed (of a changed source) or        admit (OnTimeoutHold false: roll with
//	writing, past Timeout                  what has landed; TimedOut, the caller
//	                                       warns) or hold (producer) until the
//	                                       producer lands or is released
//	any, Timeout 0                         as before Timeout, with no bound
//
// A release (Request.Released) admits whatever the producers say.
type Producing struct {
	// Timeout bounds the wait for producers, still writing or failed; 0:
	// no bound.
	Timeout time.Duration
	// OnTimeoutHold holds, rather than rolls, a restart whose producers
	// have not landed at Timeout.
	OnTimeoutHold bool
}

// Check implements Gate.
func (p Producing) Check(r Request) Verdict {
	waited := p.Waited(r)
	if len(waited) == 0 {
		return Verdict{}
	}
	pr := waited[0]
	end := cmp.Or(r.Settle.Opened, r.Now).Add(p.Timeout)
	if p.Timeout > 0 && !r.Now.Before(end) {
		if !p.OnTimeoutHold {
			return Verdict{}
		}
		return Verdict{Hold: true, Reason: ReasonProducer,
			Message: fmt.Sprintf("%s after %s; held until it lands or is released", landing(pr), short(p.Timeout))}
	}
	v := Verdict{Hold: true, Reason: ReasonChangeSet,
		Message: fmt.Sprintf("waiting for %s %s to land %s %s (%s)", pr.Object.Kind, pr.Object.Name, pr.Source.Kind, pr.Source.Name, pr.Message)}
	if pr.Failed {
		v.Reason, v.Message = ReasonProducer, landing(pr)+"; held until it recovers or is released"
	}
	if n := len(waited); n > 1 {
		v.Message += fmt.Sprintf(" and %d more", n-1)
	}
	if p.Timeout > 0 {
		v.Until = end
		then := "rolling out with what has landed"
		if p.OnTimeoutHold {
			then = "then held until it lands or is released"
		}
		v.Message += fmt.Sprintf("; at most until %s (%s from the first change), %s", end.UTC().Format(time.RFC3339), short(p.Timeout), then)
	}
	if slices.ContainsFunc(waited, func(p Producer) bool { return p.Polled }) {
		if poll := r.Now.Add(pollProducers); v.Until.IsZero() || poll.Before(v.Until) {
			v.Until = poll
		}
	}
	return v
}

// landing says for a person how far pr is: "ExternalSecret pass, which
// writes Secret pass, reports an error: ..." or "... has not landed ...".
func landing(pr Producer) string {
	if pr.Failed {
		return fmt.Sprintf("%s %s, which writes %s %s, reports an error: %s", pr.Object.Kind, pr.Object.Name, pr.Source.Kind, pr.Source.Name, pr.Message)
	}
	return fmt.Sprintf("%s %s has not landed %s %s (%s)", pr.Object.Kind, pr.Object.Name, pr.Source.Kind, pr.Source.Name, pr.Message)
}

// Waited returns the producers the restart r waits for, the failed ones
// first: those still writing, whatever they write, and the failed ones
// of the sources r changes. None when r is released.
func (Producing) Waited(r Request) []Producer {
	if r.Released {
		return nil
	}
	var failed, writing []Producer
	for _, pr := range r.Producers {
		switch {
		case !pr.Failed:
			writing = append(writing, pr)
		case changes(r, pr.Source):
			failed = append(failed, pr)
		}
	}
	return append(failed, writing...)
}

// Ignored returns the failed producers of sources the restart r does not
// change: not waited for, since the pods read the same content of those
// sources with or without the restart; the caller reports them. None
// when r is released.
func (Producing) Ignored(r Request) []Producer {
	if r.Released {
		return nil
	}
	var out []Producer
	for _, pr := range r.Producers {
		if pr.Failed && !changes(r, pr.Source) {
			out = append(out, pr)
		}
	}
	return out
}

// changes reports whether the restart r is for a change of src.
func changes(r Request, src object.Ref) bool {
	return slices.ContainsFunc(r.Sources, func(s Source) bool { return s.Object == src })
}

// TimedOut reports whether p admitted r only because the producers it
// waits for (Waited) did not land within Timeout (the caller warns).
func (p Producing) TimedOut(r Request) bool {
	if p.Timeout <= 0 || p.OnTimeoutHold || len(p.Waited(r)) == 0 {
		return false
	}
	opened := r.Settle.Opened
	return !opened.IsZero() && !r.Now.Before(opened.Add(p.Timeout))
}
