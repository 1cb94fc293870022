package producer

import (
	"fmt"
	"math"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watcher-dev/watcher/internal/note"
	"github.com/watcher-dev/watcher/internal/object"
)

// rule judges a producer from its trimmed object (Trim).
type rule func(u *unstructured.Unstructured) (State, string, string)

// kind is a known producer kind: where its target lives and how it is
// judged.
type kind struct {
	gvk      schema.GroupVersionKind
	resource string
	// target returns the name of the Secret obj produces, in its
	// namespace ("": none).
	target  func(obj *unstructured.Unstructured) string
	current rule
}

// The known kinds, in the order they are followed and checked.
//
// ExternalSecrets are followed at v1 only: External Secrets v0.16 serves
// v1 and v1beta1 from one CRD (the same objects, the same status fields),
// and served.Watcher follows one version per CRD. A release serving
// v1beta1 alone (before v0.16) is not followed.
// KindExternalSecret is the kind of External Secrets' producer, the one
// ForceSync can ask to sync.
const KindExternalSecret = "ExternalSecret"

var (
	externalSecretV1 = &kind{
		gvk:      schema.GroupVersionKind{Group: "external-secrets.io", Version: "v1", Kind: KindExternalSecret},
		resource: "externalsecrets", target: esTarget, current: externalSecret,
	}
	certificateV1 = &kind{
		gvk:      schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"},
		resource: "certificates", current: certificate,
		target: func(u *unstructured.Unstructured) string {
			s, _, _ := unstructured.NestedString(u.Object, "spec", "secretName")
			return s
		},
	}
	sealedSecretV1alpha1 = &kind{
		gvk:      schema.GroupVersionKind{Group: "bitnami.com", Version: "v1alpha1", Kind: "SealedSecret"},
		resource: "sealedsecrets", current: sealedSecret,
		target: func(u *unstructured.Unstructured) string { return u.GetName() },
	}
	kinds = []*kind{externalSecretV1, certificateV1, sealedSecretV1alpha1}
)

// Kinds returns the kinds of producers followed by informers.
func Kinds() []schema.GroupVersionKind {
	out := make([]schema.GroupVersionKind, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, k.gvk)
	}
	return out
}

// Judge returns the verdict of u, a producer of one of Kinds as the API
// server serves it (watcher explain reads them), about the Secret it
// produces, judged as the Follower judges its cache; ok is false for
// another kind, or when it produces none.
func Judge(u *unstructured.Unstructured) (v Verdict, ok bool) {
	gk := u.GroupVersionKind().GroupKind()
	for _, k := range kinds {
		if k.gvk.GroupKind() != gk {
			continue
		}
		target := k.target(u)
		if target == "" {
			return Verdict{}, false
		}
		state, reason, message := k.current(Trim(k, u))
		return Verdict{Source: object.Ref{Kind: "Secret", Namespace: u.GetNamespace(), Name: target},
			Producer: object.Ref{Kind: k.gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()},
			State:    state, Reason: reason, Message: message}, true
	}
	return Verdict{}, false
}

// Followed tells whether the producers of kind are followed by informers,
// so that their progress is told (Options.Enqueue); the others (generic
// owners) are read when asked only, and must be asked again.
func Followed(k string) bool {
	return slices.ContainsFunc(kinds, func(kd *kind) bool { return kd.gvk.Kind == k })
}

// isKnown tells whether group and kind are one of the known kinds, which
// are followed by informers and never read as generic owners.
func isKnown(group, k string) bool {
	for _, kd := range kinds {
		if kd.gvk.Group == group && kd.gvk.Kind == k {
			return true
		}
	}
	return false
}

// esTarget is the Secret an ExternalSecret writes: spec.target.name, its
// own name by default, none when its creationPolicy is None.
func esTarget(u *unstructured.Unstructured) string {
	if p, _, _ := unstructured.NestedString(u.Object, "spec", "target", "creationPolicy"); p == "None" {
		return ""
	}
	if s, _, _ := unstructured.NestedString(u.Object, "spec", "target", "name"); s != "" {
		return s
	}
	return u.GetName()
}

// esSyncsOnce tells whether External Secrets syncs the ExternalSecret u
// only once (shouldRefresh of v0.16.2): refreshPolicy CreatedOnce, or
// Periodic (the default) with a refreshInterval of 0. It then never syncs
// again, whatever its version, and a force-sync does nothing.
func esSyncsOnce(u *unstructured.Unstructured) bool {
	policy, _, _ := unstructured.NestedString(u.Object, "spec", "refreshPolicy")
	interval, found, _ := unstructured.NestedString(u.Object, "spec", "refreshInterval")
	switch policy {
	case "CreatedOnce":
		return true
	case "OnChange":
		return false
	}
	d, err := time.ParseDuration(interval)
	return found && err == nil && d <= 0
}

// externalSecret judges an ExternalSecret (see the package comment).
func externalSecret(u *unstructured.Unstructured) (State, string, string) {
	conds, ok := conditions(u)
	if !ok {
		return Progressing, ReasonMalformed, "status.conditions is not a list of conditions"
	}
	ready, found := conds["Ready"]
	switch {
	case !found:
		return Progressing, ReasonNoStatus, "no Ready condition yet"
	case ready.status == "False":
		return Failed, ReasonFailed, "Ready=False " + ready.describe()
	case ready.status != "True":
		return Progressing, ReasonNotReady, "Ready=" + quote(ready.status) + " " + ready.describe()
	}
	synced, _, err := unstructured.NestedString(u.Object, "status", "syncedResourceVersion")
	if err != nil {
		return Progressing, ReasonMalformed, "status.syncedResourceVersion is not a string"
	}
	want := cachedVersion(u)
	if synced != want && synced != "" && syncsOnce(u) {
		return Current, ReasonCurrent, "Ready=True, synced once: with refreshPolicy CreatedOnce or refreshInterval 0, External Secrets does not sync it again"
	}
	if synced != want {
		return Progressing, ReasonNotSynced, fmt.Sprintf("synced version %s, current version %s", quote(synced), quote(want))
	}
	return Current, ReasonCurrent, "Ready=True, synced version " + quote(synced)
}

// certificate judges a cert-manager Certificate (see the package comment).
func certificate(u *unstructured.Unstructured) (State, string, string) {
	conds, ok := conditions(u)
	if !ok {
		return Progressing, ReasonMalformed, "status.conditions is not a list of conditions"
	}
	if c, found := conds["Issuing"]; found {
		switch {
		case c.status == "True":
			return Progressing, ReasonIssuing, "Issuing=True " + c.describe()
		case c.status == "False" && c.reason != "Issued" && c.hasGeneration && c.generation != u.GetGeneration():
			// A failure for an older spec: the trigger issues the new
			// one without waiting for the failure's backoff.
			return Progressing, ReasonOldGeneration, fmt.Sprintf("Issuing=False is for generation %d, the Certificate is at %d", c.generation, u.GetGeneration())
		case c.status == "False" && c.reason != "Issued":
			return Failed, ReasonFailed, "Issuing=False " + c.describe()
		}
	}
	ready, found := conds["Ready"]
	switch {
	case !found:
		return Progressing, ReasonNoStatus, "no Ready condition yet"
	case !ready.hasGeneration || ready.generation != u.GetGeneration():
		return Progressing, ReasonOldGeneration, fmt.Sprintf("Ready is for generation %s, the Certificate is at %d", ready.generationString(), u.GetGeneration())
	case ready.status != "True":
		return Progressing, ReasonNotReady, "Ready=" + quote(ready.status) + " " + ready.describe()
	}
	return Current, ReasonCurrent, fmt.Sprintf("Ready=True at generation %d", u.GetGeneration())
}

// sealedSecret judges a Bitnami SealedSecret (see the package comment).
func sealedSecret(u *unstructured.Unstructured) (State, string, string) {
	conds, ok := conditions(u)
	if !ok {
		return Progressing, ReasonMalformed, "status.conditions is not a list of conditions"
	}
	observed, hasObserved, ok := observedGeneration(u)
	if !ok {
		return Progressing, ReasonMalformed, "status.observedGeneration is not a number"
	}
	synced, found := conds["Synced"]
	switch {
	case !found:
		return Progressing, ReasonNoStatus, "no Synced condition yet"
	case !hasObserved || observed != u.GetGeneration():
		return Progressing, ReasonOldGeneration, fmt.Sprintf("status is for generation %s, the SealedSecret is at %d", generationString(observed, hasObserved), u.GetGeneration())
	case synced.status == "False":
		return Failed, ReasonFailed, "Synced=False " + synced.describe()
	case synced.status != "True":
		return Progressing, ReasonNotReady, "Synced=" + quote(synced.status) + " " + synced.describe()
	}
	return Current, ReasonCurrent, fmt.Sprintf("Synced=True at generation %d", u.GetGeneration())
}

// generic judges a controller owner reporting kstatus-style status; ok is
// false when it is not a producer (no Ready condition, or no
// observedGeneration in its status nor on its Ready condition).
func generic(u *unstructured.Unstructured) (state State, reason, message string, ok bool) {
	conds, okConds := conditions(u)
	observed, hasObserved, okObserved := observedGeneration(u)
	if !okConds || !okObserved {
		return Progressing, ReasonMalformed, "status.conditions or status.observedGeneration cannot be read", true
	}
	ready, found := conds["Ready"]
	if !found {
		return 0, "", "", false
	}
	if !hasObserved {
		observed, hasObserved = ready.generation, ready.hasGeneration
	}
	if !hasObserved {
		return 0, "", "", false
	}
	gen := u.GetGeneration()
	switch {
	case observed != gen:
		return Progressing, ReasonOldGeneration, fmt.Sprintf("status is for generation %d, the owner is at %d", observed, gen), true
	case conds["Stalled"].status == "True":
		return Failed, ReasonFailed, "Stalled=True " + conds["Stalled"].describe(), true
	case conds["Reconciling"].status == "True":
		return Progressing, ReasonNotReady, "Reconciling=True " + conds["Reconciling"].describe(), true
	case ready.status == "False":
		return Failed, ReasonFailed, "Ready=False " + ready.describe(), true
	case ready.status != "True":
		return Progressing, ReasonNotReady, "Ready=" + quote(ready.status) + " " + ready.describe(), true
	}
	return Current, ReasonCurrent, fmt.Sprintf("Ready=True at generation %d", gen), true
}

// condition is what a rule reads of a status condition.
type condition struct {
	status, reason, message string
	generation              int64
	hasGeneration           bool
}

// describe returns the condition's reason and message, quoted and cut.
func (c condition) describe() string {
	return "reason " + quote(c.reason) + ": " + note.Quote(c.message, maxMessage)
}

func (c condition) generationString() string { return generationString(c.generation, c.hasGeneration) }

func generationString(g int64, ok bool) string {
	if !ok {
		return "none"
	}
	return fmt.Sprint(g)
}

// quote quotes a short value a tenant wrote (a status, a reason, a
// version), cut to a bound.
func quote(s string) string { return note.Quote(s, 64) }

// maxConditions bounds the conditions read of one object.
const maxConditions = 32

// conditions returns status.conditions by type (the first of each type);
// ok is false when it is not a list of objects. Entries that are not
// objects, or have no type, are skipped.
func conditions(u *unstructured.Unstructured) (map[string]condition, bool) {
	raw, found, err := unstructured.NestedFieldNoCopy(u.Object, "status", "conditions")
	if err != nil {
		return nil, false
	}
	if !found || raw == nil {
		return map[string]condition{}, true
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, false
	}
	out := make(map[string]condition, len(list))
	for i, item := range list {
		if i == maxConditions {
			break
		}
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		t, _ := m["type"].(string)
		if _, dup := out[t]; t == "" || dup {
			continue
		}
		c := condition{}
		c.status, _ = m["status"].(string)
		c.reason, _ = m["reason"].(string)
		c.message, _ = m["message"].(string)
		c.generation, c.hasGeneration = toInt64(m["observedGeneration"])
		out[t] = c
	}
	return out, true
}

// observedGeneration returns status.observedGeneration and whether it is
// there; ok is false when it is there but not a number.
func observedGeneration(u *unstructured.Unstructured) (g int64, found, ok bool) {
	raw, found, err := unstructured.NestedFieldNoCopy(u.Object, "status", "observedGeneration")
	if err != nil {
		return 0, false, false
	}
	if !found || raw == nil {
		return 0, false, true
	}
	g, ok = toInt64(raw)
	return g, ok, ok
}

// toInt64 reads a number as decoded from JSON (int64, or float64 when a
// client wrote it so) or written in Go (int).
func toInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case float64:
		if n != math.Trunc(n) || math.Abs(n) > 1<<53 {
			return 0, false
		}
		return int64(n), true
	}
	return 0, false
}
