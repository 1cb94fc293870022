// Package cause is what watcher says about a restart: which ConfigMaps and
// Secrets changed, which of their keys, the SealedSecret a Secret was made
// from and who changed it. One Restart value is built where a restart is
// decided and rendered for each reader from that value only: the log line
// (a constant message with key/value pairs), the Event note, the alert
// (package alert) and the CLI (package explain). A fact added here shows
// in all four.
package cause

import (
	"strings"

	"github.com/watcher-dev/watcher/internal/attribution"
	"github.com/watcher-dev/watcher/internal/note"
	"github.com/watcher-dev/watcher/internal/object"
)

// Event reasons of a restart, on the workload.
const (
	// ReasonRestarted: the pod template was changed to restart the pods.
	ReasonRestarted = "Restarted"
	// ReasonUpdatedOnDelete: the template was updated, but the workload's
	// pods roll only when deleted (updateStrategy OnDelete).
	ReasonUpdatedOnDelete = "UpdatedOnDelete"
	// ReasonWouldRestart: dry-run, nothing written.
	ReasonWouldRestart = "WouldRestart"
)

// Reasons are the Event reasons of restarts, made or not, for readers of
// a workload's history (the CLI).
var Reasons = []string{ReasonRestarted, ReasonWouldRestart, ReasonUpdatedOnDelete}

// SecretProviderClass is the kind of a Change that is a rotation of the
// Secrets Store CSI Driver (package csi): its keys are the ids of the
// objects whose versions changed, and it "rotated" rather than "changed".
const SecretProviderClass = "SecretProviderClass"

// Change is one changed ConfigMap or Secret, or one rotated
// SecretProviderClass.
type Change struct {
	// Source is the ConfigMap or Secret.
	Source object.Ref
	// Keys are the names of the keys whose value changed; nil when the
	// record holds one digest for the object (the keys were not recorded
	// one by one).
	Keys []string
	// Old and New are short digests of the content before and after, for
	// the Event ("" when unknown: not shown).
	Old, New string
	// SealedSecret is the SealedSecret the Secret was made from, if any.
	SealedSecret string
	// ChangedBy are the field managers that changed its data, as the
	// writers claim them; none when unknown.
	ChangedBy []string
	// KeysUnknown: the keys are not known where the change is said (an
	// alert of the restart guards names only the source), so nothing is
	// said of them, where nil Keys say that they were recorded as one
	// digest.
	KeysUnknown bool
}

// Restart is what is said of one restart of a workload.
type Restart struct {
	Workload object.Ref
	Changes  []Change
	// OnDelete is the workload's update strategy when its pods roll only
	// when deleted ("OnDelete"): the template is updated, no pod restarts.
	OnDelete string
	// DryRun: nothing was written.
	DryRun bool
}

// String says what changed, for people reading logs or the CLI:
// "Secret shop/db (from SealedSecret shop/db) changed (keys: password) by
// kubectl-edit".
func (c Change) String() string { return c.sentence(true, "") }

// Note says what changed in an Event on the workload, whose namespace is
// the source's: "Secret db (from SealedSecret db) changed (keys: password;
// 1a2b3c4d→5e6f7a8b) by kubectl-edit".
func (c Change) Note() string {
	digests := ""
	if c.Old != "" || c.New != "" {
		digests = "; " + c.Old + "→" + c.New
	}
	return c.sentence(false, digests)
}

// Clauses are the parts of the sentence of a change, each name it quotes
// rendered by its reader: a reader that shows names its own way (package
// alert renders them inert) or lays the parts out its own way (the alert's
// Teams card, as facts) takes the words from here, so that cause is their
// only author.
//
//	clause  ConfigMap or Secret            SecretProviderClass   keys not known
//	Source  "Secret shop/db"               "SecretProviderClass shop/db-creds"
//	From    "from SealedSecret shop/db"    ""
//	Verb    "changed"                      "rotated"
//	What    "keys: password", or           "objects: secret/x"   ""
//	        "keys: not listed, recorded as one digest" (nil Keys)
//	By      "kubectl-edit and helm", "" when no writer is known
type Clauses struct {
	Source, From, Verb, What, By string
}

// Sentence joins the clauses, with digests ("; 1a2b3c4d→5e6f7a8b", or
// "") after the keys: "Secret shop/db (from SealedSecret shop/db) changed
// (keys: password) by kubectl-edit".
func (c Clauses) Sentence(digests string) string {
	var b strings.Builder
	b.WriteString(c.Source)
	if c.From != "" {
		b.WriteString(" (" + c.From + ")")
	}
	b.WriteString(" " + c.Verb)
	if what := c.What + digests; what != "" {
		b.WriteString(" (" + strings.TrimPrefix(what, "; ") + ")")
	}
	if c.By != "" {
		b.WriteString(" by " + c.By)
	}
	return b.String()
}

// Say returns the clauses of c with the names it quotes (the source and
// the SealedSecret with their namespace, the keys, the writers) rendered by
// name; String is Say of the names as they are.
func (c Change) Say(name func(string) string) Clauses {
	return c.clauses(true, name)
}

// clauses says c, its object names with their namespace if namespaced,
// every name rendered by name.
func (c Change) clauses(namespaced bool, name func(string) string) Clauses {
	object := func(n string) string { return name(n) }
	if namespaced {
		object = func(n string) string { return name(c.Source.Namespace + "/" + n) }
	}
	cl := Clauses{Source: c.Source.Kind + " " + object(c.Source.Name), Verb: "changed"}
	if c.SealedSecret != "" {
		cl.From = "from SealedSecret " + object(c.SealedSecret)
	}
	noun := "keys"
	if c.Source.Kind == SecretProviderClass {
		cl.Verb, noun = "rotated", "objects"
	}
	if !c.KeysUnknown {
		cl.What = noun + ": " + KeyList(names(c.Keys, name))
	}
	if len(c.ChangedBy) > 0 {
		cl.By = attribution.Join(names(c.ChangedBy, name))
	}
	return cl
}

// sentence says c, its names with their namespace if namespaced.
func (c Change) sentence(namespaced bool, digests string) string {
	return c.clauses(namespaced, same).Sentence(digests)
}

func same(s string) string { return s }

// names returns name of every one of ns, nil if ns is nil.
func names(ns []string, name func(string) string) []string {
	if ns == nil {
		return nil
	}
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = name(n)
	}
	return out
}

// KeyList joins keys for people, or says that they were not recorded one
// by one.
func KeyList(keys []string) string {
	if keys == nil {
		return "not listed, recorded as one digest"
	}
	return strings.Join(keys, ", ")
}

// Because returns one String per change.
func (r Restart) Because() []string {
	out := make([]string, len(r.Changes))
	for i, c := range r.Changes {
		out[i] = c.String()
	}
	return out
}

// Reason is the reason of the Event on the workload.
func (r Restart) Reason() string {
	switch {
	case r.DryRun:
		return ReasonWouldRestart
	case r.OnDelete != "":
		return ReasonUpdatedOnDelete
	}
	return ReasonRestarted
}

// Message is the constant message of the log line (its values are in
// KeysAndValues).
func (r Restart) Message() string {
	switch {
	case r.DryRun && r.OnDelete != "":
		return "Dry run: would update the template; pods pick up the change only when deleted"
	case r.DryRun:
		return "Dry run: would restart"
	case r.OnDelete != "":
		return "Template updated; pods pick up the change only when deleted"
	}
	return "Restarted"
}

// KeysAndValues are the log line's values: the workload, why (one String
// per change), the update strategy when pods roll only when deleted, and
// dryRun when nothing was written.
func (r Restart) KeysAndValues() []any {
	kv := []any{"workload", r.Workload.String(), "because", r.Because()}
	if r.OnDelete != "" {
		kv = append(kv, "updateStrategy", r.OnDelete)
	}
	if r.DryRun {
		kv = append(kv, "dryRun", true)
	}
	return kv
}

// Note is the Event's note, within the Event's limit (package note).
func (r Restart) Note() string {
	notes := make([]string, len(r.Changes))
	for i, c := range r.Changes {
		notes[i] = c.Note()
	}
	var prefix string
	switch {
	case r.DryRun && r.OnDelete != "":
		prefix = "Dry run, nothing written: would update the template (pods pick up the change only when deleted, " + r.OnDelete + ") because "
	case r.DryRun:
		prefix = "Dry run, nothing written: would restart because "
	case r.OnDelete != "":
		prefix = "Template updated, but pods pick up the change only when deleted (" + r.OnDelete + "): "
	default:
		prefix = "Restarted because "
	}
	return note.Join(prefix, notes)
}

// Sentence says the restart in one line for the CLI, which reports on one
// namespace: "restart pending because ConfigMap cfg changed (keys: a)"
// with pending true.
func (r Restart) Sentence(pending bool) string {
	var parts []string
	for _, c := range r.Changes {
		parts = append(parts, c.sentence(false, ""))
	}
	because := strings.Join(parts, ", ")
	switch {
	case pending && r.OnDelete != "":
		return "template update pending (pods roll only when deleted, " + r.OnDelete + ") because " + because
	case pending:
		return "restart pending because " + because
	case r.OnDelete != "":
		return "template updated (pods roll only when deleted, " + r.OnDelete + ") because " + because
	}
	return "restarted because " + because
}
