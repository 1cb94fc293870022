package alert

import "strings"

// guardEvents maps the event types of the restart guards (held, flapping,
// rollout-failed; package guard) to alert events. Releases are not
// alerted.
var guardEvents = map[string]string{"held": Held, "flapping": Flapping, "rollout-failed": FailedRollout}

// FromGuard returns the alert of an event of the restart guards, given as
// its fields (typ, the workload and source as "Kind namespace/name", the
// reason and the message of its Kubernetes Event), so that the controller
// can pass the guards' events on with a three-line adapter; ok is false for
// an event that is not alerted.
func FromGuard(typ, workload, source, reason, message string) (a Alert, ok bool) {
	event, ok := guardEvents[typ]
	if !ok {
		return Alert{}, false
	}
	a = Alert{Event: event, Reason: reason, Detail: message}
	if o, ok := parseObject(workload); ok {
		a.Workload = &o
	}
	if o, ok := parseObject(source); ok {
		a.Sources = []Source{{Object: o}}
	}
	return a, true
}

// parseObject reads "Kind namespace/name".
func parseObject(s string) (Object, bool) {
	kind, rest, ok := strings.Cut(s, " ")
	ns, name, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || kind == "" || name == "" {
		return Object{}, false
	}
	return Object{Kind: kind, Namespace: ns, Name: name}, true
}
