// Package pin decides and names pinned config revisions.
//
// A pinned workload's pods read immutable copies (snapshots) of its
// ConfigMaps and Secrets, made by watcher at each restart, instead of the
// live objects. Each restart writes on the pod template, in one
// annotation (PinsAnnotation), which snapshot each source maps to; the
// template is stored in every ReplicaSet or ControllerRevision, so a
// native rollback (kubectl rollout undo) brings back the pins of the
// revision it returns to. A MutatingAdmissionPolicy shipped by the chart
// rewrites, in every new pod carrying the annotation, the names it lists.
//
// A snapshot is named from its source's name and the keyed digest of its
// content (hash.Digest.Sum, which reveals nothing of a Secret's value):
// the same content of the same source always gives the same name, so a
// snapshot is shared by every revision and workload that pins it, and a
// Git revert reuses the snapshot of the content it returns to.
//
// What pins a workload, and what floats:
//
//	workload watcher.dev/pin   source                                pinned?
//	"true"                     ConfigMap or Secret read by the pods  yes
//	"true"                     Secret of a service-account token,    no: floats (a
//	                           an image pull secret (dockercfg,      credential must
//	                           dockerconfigjson), a cert-manager     stay live)
//	                           certificate's Secret
//	"true"                     annotated watcher.dev/pin: "false"    no: floats
//	absent, "false"            any                                   no
//
// What a pinned workload's template says, against the revision watcher last
// wrote (RevisionLabel on the workload, which a rollback does not touch):
//
//	template pins   label            Verdict
//	none            none             Unpinned (never pinned, or not yet)
//	none            set              Stripped (a tool removed them)
//	same digest     set              Current
//	other digest    set or none      RolledBack (a native rollback, or an
//	                                 older revision re-applied)
package pin

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"slices"
	"strings"
)

// The names watcher writes and reads.
const (
	// Annotation opts a workload in ("true"); on a ConfigMap or Secret,
	// "false" makes it float: never pinned.
	Annotation = "watcher.dev/pin"
	// PinsAnnotation, on the pod template, maps each pinned source to its
	// snapshot (Pins.String).
	PinsAnnotation = "watcher.dev/pins"
	// PinnedLabel, "true" on the pod template, is carried by every
	// ReplicaSet and ControllerRevision made from it: watcher watches those
	// to hand them the snapshots they pin.
	PinnedLabel = "watcher.dev/pinned"
	// RevisionLabel, on the workload, is the digest of the pins watcher
	// last wrote (Pins.Digest). A label, because kubectl rollout undo
	// replaces a Deployment's annotations but not its labels.
	RevisionLabel = "watcher.dev/pinned-revision"
	// RolledBackFrom, on the workload, names the snapshots of the contents
	// a rollback left (Pins.String): watcher does not roll forward to them
	// until another content arrives, or a person removes it.
	RolledBackFrom = "watcher.dev/rolled-back-from"
	// SnapshotLabel, "true", marks a snapshot.
	SnapshotLabel = "watcher.dev/snapshot"
	// SnapshotOf, on a snapshot, names its source ("configmap/name").
	SnapshotOf = "watcher.dev/snapshot-of"
	// Admitted, "true" on a pod, is written by the admission policy that
	// pinned it: a pod of a pinned revision without it came up unpinned.
	Admitted = "watcher.dev/pins-admitted"
	// Bytes, on a snapshot, is the size of its content (keys and values),
	// for the namespace's budget.
	Bytes = "watcher.dev/snapshot-bytes"
	// ChangedBy, on a snapshot, names the field managers that last wrote
	// its source's content before it was copied, comma-separated.
	ChangedBy = "watcher.dev/changed-by"
)

// Source is a ConfigMap or Secret of the workload's namespace.
type Source struct {
	// Kind is "configmap" or "secret".
	Kind string
	Name string
}

// The kinds of Source.
const (
	ConfigMap = "configmap"
	Secret    = "secret"
)

// SourceOf returns the Source of an object of kind ("ConfigMap" or
// "Secret", as references name them) named name; false for another kind.
func SourceOf(kind, name string) (Source, bool) {
	switch kind {
	case "ConfigMap":
		return Source{Kind: ConfigMap, Name: name}, true
	case "Secret":
		return Source{Kind: Secret, Name: name}, true
	}
	return Source{}, false
}

// String returns "kind/name".
func (s Source) String() string { return s.Kind + "/" + s.Name }

// ObjectKind is the kind of s as the API and references name it
// ("ConfigMap", "Secret"): SourceOf's inverse.
func (s Source) ObjectKind() string {
	if s.Kind == Secret {
		return "Secret"
	}
	return "ConfigMap"
}

// ID is s as a reference names it ("ConfigMap/name", refs.Ref.ID).
func (s Source) ID() string { return s.ObjectKind() + "/" + s.Name }

// Pins maps each pinned source to its snapshot's name.
type Pins map[Source]string

// entry is one well-formed entry of PinsAnnotation.
var entry = regexp.MustCompile(`^(configmap|secret)/([a-z0-9.-]{1,253})=([a-z0-9.-]{1,253})$`)

// Parse reads a PinsAnnotation; malformed entries are left out (the
// admission policy ignores them alike).
func Parse(s string) Pins {
	if s == "" {
		return nil
	}
	p := Pins{}
	for _, e := range strings.Split(s, ",") {
		m := entry.FindStringSubmatch(e)
		if m == nil {
			continue
		}
		p[Source{Kind: m[1], Name: m[2]}] = m[3]
	}
	if len(p) == 0 {
		return nil
	}
	return p
}

// String writes p as PinsAnnotation: entries sorted, "" when empty.
func (p Pins) String() string {
	out := make([]string, 0, len(p))
	for s, snap := range p {
		out = append(out, s.String()+"="+snap)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// Digest names p in 16 hex digits (RevisionLabel); "" when p is empty.
func (p Pins) Digest() string {
	if len(p) == 0 {
		return ""
	}
	sum := sha256.Sum256([]byte(p.String()))
	return hex.EncodeToString(sum[:])[:16]
}

// SumLen is the number of hex digits of the content digest in a snapshot's
// name.
const SumLen = 20

// maxName is the longest name of a ConfigMap or Secret.
const maxName = 253

// SnapshotName names the snapshot of source at the content whose digest
// (hash.Digest.Sum, hex) is sum: the source's name, cut to fit, then
// "-pin-" and the digest's first SumLen digits.
func SnapshotName(source, sum string) string {
	suffix := "-pin-" + sum[:min(SumLen, len(sum))]
	base := source[:min(len(source), maxName-len(suffix))]
	base = strings.TrimRight(base, ".-")
	return base + suffix
}

// Verdict is what a pinned workload's template says (see the package
// comment).
type Verdict int

const (
	Unpinned Verdict = iota
	Current
	Stripped
	RolledBack
)

// UnpinnedRevision is the RevisionLabel of a workload that asks for
// pinning and whose last restart pinned nothing (every snapshot refused,
// over the budget, too many sources): watcher wrote no pins, no tool
// stripped them.
const UnpinnedRevision = "none"

// Judge compares the pins of a workload's template with the digest of the
// pins watcher last wrote (its RevisionLabel, "" when none).
func Judge(template Pins, revision string) Verdict {
	switch {
	case len(template) == 0 && (revision == "" || revision == UnpinnedRevision):
		return Unpinned
	case len(template) == 0:
		return Stripped
	case template.Digest() == revision:
		return Current
	default:
		return RolledBack
	}
}

// Floats reports why a Secret of type typ with annotations ann must stay
// live, "" when it may be pinned. A ConfigMap floats only when annotated.
func Floats(kind, typ string, ann map[string]string) string {
	if ann[Annotation] == "false" {
		return Annotation + `: "false"`
	}
	if kind != Secret {
		return ""
	}
	switch typ {
	case "kubernetes.io/service-account-token":
		return "a service-account token"
	case "kubernetes.io/dockercfg", "kubernetes.io/dockerconfigjson":
		return "an image pull secret"
	}
	if _, ok := ann[CertificateName]; ok {
		return "a cert-manager certificate"
	}
	return ""
}

// CertificateName, on a Secret, names the cert-manager Certificate that
// writes it: such a Secret floats.
const CertificateName = "cert-manager.io/certificate-name"

// LeftByRollback reports whether a restart for the changes of sources,
// each at the content whose snapshot live names ("" when it is no
// ConfigMap or Secret, or not known), would only roll forward to what a
// rollback left (from, the workload's RolledBackFrom): then it is not
// made, until another content arrives or a person removes RolledBackFrom.
func LeftByRollback(from Pins, sources []Source, live func(Source) string) bool {
	if len(from) == 0 || len(sources) == 0 {
		return false
	}
	for _, src := range sources {
		if l := live(src); l == "" || from[src] != l {
			return false
		}
	}
	return true
}

// Wanted reports whether the workload annotations ann ask for pinning.
func Wanted(ann map[string]string) bool { return ann[Annotation] == "true" }

// Sorted returns the sources of p in order.
func Sorted(p Pins) []Source {
	out := make([]Source, 0, len(p))
	for s := range p {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Source) int { return strings.Compare(a.String(), b.String()) })
	return out
}
