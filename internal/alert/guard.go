package alert

import (
	"github.com/watcher-dev/watcher/internal/cause"
	"github.com/watcher-dev/watcher/internal/object"
)

// guardEvents maps the event types of the restart guards (held, flapping,
// rollout-failed; package guard) to alert events. Releases are not
// alerted.
var guardEvents = map[string]string{"held": Held, "flapping": Flapping, "rollout-failed": FailedRollout}

// FromGuard returns the alert of an event of the restart guards, given as
// its fields (typ, the workload and source, zero when none, the reason and
// the message of its Kubernetes Event), so that the controller can pass
// the guards' events on with a three-line adapter; ok is false for an
// event that is not alerted.
func FromGuard(typ string, workload, source object.Ref, reason, message string) (a Alert, ok bool) {
	event, ok := guardEvents[typ]
	if !ok {
		return Alert{}, false
	}
	a = Alert{Event: event, Reason: reason, Detail: message}
	if !workload.IsZero() {
		o := ObjectOf(workload)
		a.Workload = &o
	}
	if !source.IsZero() {
		a.Sources = []Source{{Object: ObjectOf(source)}}
	}
	return a, true
}

// ObjectOf returns the alert's Object of ref.
func ObjectOf(ref object.Ref) Object {
	return Object{Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name}
}

// FromRestart returns the alert of a restart watcher made (or, in a dry
// run, would have made: DryRun), from what is
// said of it (package cause), so that the alert and the Event tell the same
// facts.
func FromRestart(said cause.Restart) Alert {
	w := ObjectOf(said.Workload)
	a := Alert{Event: Restart, Workload: &w, DryRun: said.DryRun}
	for _, c := range said.Changes {
		a.Sources = append(a.Sources, Source{Object: ObjectOf(c.Source), Keys: c.Keys, SealedSecret: c.SealedSecret, ChangedBy: c.ChangedBy})
	}
	return a
}
