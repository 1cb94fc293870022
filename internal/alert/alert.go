// Package alert sends a message to a chat or a webhook when watcher
// restarts a workload (in a dry run, when it would) and, each switched on apart, when a restart is held,
// a ConfigMap or Secret flaps or a rollout fails. The settings are
// Reloader's (ALERT_ON_RELOAD, ALERT_SINK, ALERT_WEBHOOK_URL,
// ALERT_ADDITIONAL_INFO, ALERT_WEBHOOK_PROXY), so that a deployment of
// Reloader keeps its alerts.
//
// Each sink gets the message in its service's own format:
//
//	sink     body
//	slack    Slack incoming webhook: text (the fallback) and blocks
//	teams    Microsoft Teams connector: a MessageCard with facts
//	gchat    Google Chat incoming webhook: text
//	webhook  plain JSON: the Alert's fields (Reloader sends plain text)
//
// An alert names the workload, the ConfigMaps and Secrets that changed,
// their changed keys, the SealedSecret a Secret came from and who changed
// it (the field managers): never a value.
//
// Sending is asynchronous and never delays a restart: Notify puts the
// alert in a bounded queue and returns; when the queue is full the alert is
// dropped. No namespace can fill the queue: each may send a few alerts a
// minute (a token bucket per namespace, Limit), and failed rollouts have a
// queue and buckets of their own, emptied first, so that held or flapping
// alerts never crowd one out. One worker sends, retrying a failed send a
// few times with backoff. Every alert ends counted in
// watcher_alerts_total{sink,result} as sent, failed, rate-limited or
// dropped, and failures are logged, without the URL (a Slack or Teams
// webhook URL is a credential).
//
// Names chosen by writers (field managers, object names, keys) are inert
// in every sink: see style.
package alert

import (
	"fmt"
	"strings"

	"github.com/watcher-dev/watcher/internal/cause"
	"github.com/watcher-dev/watcher/internal/object"
)

// The events an alert is about.
const (
	// Restart: a workload was restarted.
	Restart = "restart"
	// Held: a restart was held back (a restart budget, a flapping source,
	// a wave, a failed rollout, a time window).
	Held = "held"
	// Flapping: a ConfigMap or Secret changes too often; the restarts of
	// its users are held.
	Flapping = "flapping"
	// FailedRollout: a rollout watcher started did not finish in time.
	FailedRollout = "failed-rollout"
)

// Events are the events, in the order of their switches.
var Events = []string{Restart, Held, Flapping, FailedRollout}

// Notifier takes alerts. Notify never blocks and never fails: what cannot
// be sent is logged and counted by the notifier.
type Notifier interface {
	Notify(Alert)
}

// Alert is one notification.
type Alert struct {
	// Event is Restart, Held, Flapping or FailedRollout.
	Event string `json:"event"`
	// Workload is the workload concerned, if any (none for Flapping).
	Workload *Object `json:"workload,omitempty"`
	// Sources are the ConfigMaps and Secrets whose change it is about.
	Sources []Source `json:"sources,omitempty"`
	// Reason says why, for Held (budget, flapping, wave, failed-rollout,
	// window) and FailedRollout; Detail says more, in words.
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
	// DryRun is true, for Restart, when watcher only says it would restart
	// (--dry-run): nothing was written.
	DryRun bool `json:"dryRun,omitempty"`
}

// Object names an object.
type Object struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// String returns "Kind namespace/name".
func (o Object) String() string { return o.Kind + " " + o.Namespace + "/" + o.Name }

// Source is a changed ConfigMap or Secret.
type Source struct {
	Object
	// Keys are the keys whose value changed: names only. In a Restart, nil
	// Keys say that the record held one digest for the object (as in
	// cause.Change); the other events name only the source, and nil Keys
	// say nothing.
	Keys []string `json:"keys,omitempty"`
	// SealedSecret is the SealedSecret a Secret was made from, if any.
	SealedSecret string `json:"sealedSecret,omitempty"`
	// ChangedBy are the field managers that changed its data.
	ChangedBy []string `json:"changedBy,omitempty"`
}

// says are the clauses of what changed of s in an alert about event, as
// package cause says them, each name rendered by st: "Secret `shop/db`
// (from SealedSecret `shop/db`) changed (keys: `password`) by
// `kubectl-edit`" in the chat sinks.
func (s Source) says(event string, st style) cause.Clauses {
	c := cause.Change{
		Source: object.Ref{Kind: s.Kind, Namespace: s.Namespace, Name: s.Name},
		Keys:   s.Keys, SealedSecret: s.SealedSecret, ChangedBy: s.ChangedBy,
		KeysUnknown: event != Restart && s.Keys == nil,
	}
	return c.Say(st.name)
}

// title is the alert's headline, in st.
func (a Alert) title(st style) string {
	w := ""
	if a.Workload != nil {
		w = a.Workload.Kind + " " + st.name(a.Workload.Namespace+"/"+a.Workload.Name)
	}
	reason := ""
	if a.Reason != "" {
		reason = " (" + st.own(a.Reason) + ")"
	}
	switch a.Event {
	case Restart:
		if a.DryRun {
			return "watcher would restart " + w + " (dry run)"
		}
		return "watcher restarted " + w
	case Held:
		return "watcher held the restart of " + w + reason
	case Flapping:
		what := "a source"
		if len(a.Sources) > 0 {
			s := a.Sources[0]
			what = s.says(a.Event, st).Source
		}
		return "watcher: " + what + " is flapping; restarts of its users are held"
	case FailedRollout:
		return "watcher: the rollout of " + w + " failed" + reason
	}
	return fmt.Sprintf("watcher: %s %s", st.own(a.Event), w)
}

// lines are the alert's details, in st: one per source, then Detail.
func (a Alert) lines(st style) []string {
	var out []string
	for _, s := range a.Sources {
		out = append(out, s.says(a.Event, st).Sentence(""))
	}
	if a.Detail != "" {
		out = append(out, st.name(a.Detail))
	}
	return out
}

// text is the whole alert as one text, in st: the title, "because" and
// the lines.
func (a Alert) text(st style) string {
	t := a.title(st)
	if l := a.lines(st); len(l) > 0 {
		sep := ": "
		if a.Event == Restart {
			sep = " because "
		}
		t += sep + strings.Join(l, "; ")
	}
	return t
}
