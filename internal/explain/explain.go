// Package explain says, for people, what watcher does with a workload, a
// ConfigMap or a Secret, and draws which workloads use which objects. It is
// pure: the caller (package cli, the watcher graph and watcher explain
// commands) reads the objects from a cluster, and this package decides with
// the same resolver (resolve.Standard), rule chain (plan.NewChain), gatherer
// (package gather: the record, the input, what a change does) and decision
// (plan.Decide) as the controller, so that what it reports is what the
// controller would do.
//
// Nothing it returns holds a Secret value: ConfigMaps and Secrets reach it
// as key names and keyed hashes (hash.NamespaceKey: keyed with the key of
// their namespace, derived from the installation's), and of the hashes only
// the first HashPrefix hex digits are reported, to show which keys changed.
//
//	what is explained   what the report says
//	a workload          whether watcher handles it (namespaces, workload
//	                    selector), each object it uses (kind, name, keys,
//	                    paths, the sources that found it), the rule that
//	                    drops or ignores each, the state of its record, the
//	                    recorded and current hash of each key, the action
//	                    watcher would take now (a restart pending, and why),
//	                    and its last restarts
//	a ConfigMap/Secret  its keys, the workloads that use it and what its
//	                    change does to each, and per key the workloads a
//	                    change of that key restarts
//	a namespace (graph) every workload, the objects it uses, through which
//	                    keys and paths
package explain

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/packed"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/policy"
	"github.com/watcher-dev/watcher/internal/producer"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/resolve"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/workload"
)

// HashPrefix is how many hex digits of a keyed hash are reported: enough
// to tell a changed key, far too few to test guesses against.
const HashPrefix = 8

// Settings are those of the installation explained.
type Settings struct {
	// Resolver finds the references of workloads (resolve.Standard).
	Resolver *resolve.Resolver
	// Policies are the cluster's ReloadPolicies (the Resolver's
	// policy.References reads the same); nil: none.
	Policies *policy.Index
	// Rules say which references count (plan.NewChain).
	Rules plan.Chain
	// RestartOnCreate and ReloadOnDelete: see plan.Input.
	RestartOnCreate, ReloadOnDelete bool
	// IgnoredKinds are the workload kinds not watched (kind names).
	IgnoredKinds []string
	// Namespaces are the namespaces watched; empty: all.
	Namespaces []string
	// WorkloadSelector and ConfigSelector select the workloads and the
	// ConfigMaps/Secrets watched; nil: all.
	WorkloadSelector, ConfigSelector labels.Selector
	// NamespaceSelector selects the namespaces watched (nil: all), by the
	// labels NamespaceLabels gives; ok false: they cannot be read, and
	// nothing is said of the namespace.
	NamespaceSelector labels.Selector
	NamespaceLabels   func(namespace string) (_ map[string]string, ok bool)
	// HashKeyID is the ID of the installation's hash key (hash.Hasher.ID)
	// that the key of the namespace explained derives from
	// (hash.NamespaceKey.ID); empty when that key is unknown, and then no
	// hash is compared and HashKeyProblem says why.
	HashKeyID      string
	HashKeyProblem string
	// Configs lists the ConfigMaps and Secrets of a namespace (metadata),
	// for the references a workload makes by pattern (reload-list
	// patterns): the resolver expands them as the controller does from its
	// store. Nil: none.
	Configs resolve.Configs
	// Pinning: the installation pins workloads' config (--pinning, and its
	// admission policy installed), as the caller found out: the rules
	// after the decision run with pinning on (verdict.Pinning.On) for a
	// workload that pins, or has pins, of a kind that keeps its templates
	// in revisions.
	Pinning bool
	// Strategy is the installation's restart strategy (--strategy); nil:
	// restart.Default. A workload's own annotation wins (restart.For).
	Strategy restart.Strategy
}

// configs returns s.Configs, or a lister of nothing.
// named returns the IDs of the references among uses that a ReloadPolicy
// applying to obj names (plan.Input.Policies), as the controller decides.
func (s Settings) named(obj client.Object, uses []refs.Ref) map[string]bool {
	if s.Policies == nil {
		return nil
	}
	a, err := s.Policies.For(obj, uses, s.configs())
	if err != nil {
		return nil
	}
	return a.Named
}

func (s Settings) configs() resolve.Configs {
	if s.Configs == nil {
		return noConfigs{}
	}
	return s.Configs
}

// noConfigs lists no object.
type noConfigs struct{}

func (noConfigs) List(refs.Kind, string) ([]*packed.Object, error) { return nil, nil }

// Config is what was read of one ConfigMap or Secret.
type Config struct {
	Kind      refs.Kind
	Namespace string
	Name      string
	// Found is false when the object does not exist.
	Found bool
	// Unreadable, when set, says why the object could not be read (its
	// keys are then unknown).
	Unreadable string
	// Keys maps each key to its keyed hash (hash.Digest.Keys); the hashes
	// are empty when Settings.HashKeyID is. Nil for a graph, which reads
	// metadata only.
	Keys map[string]string
	// SealedSecret is the SealedSecret a Secret was made from, if any;
	// ChangedBy are the newest writers of its data (what they claim), for
	// saying a change as the controller says it (package cause).
	SealedSecret string
	ChangedBy    []string
	// Annotations and Labels are the object's, for the rules and the
	// config selector.
	Annotations, Labels map[string]string
	// Type is a Secret's type (for what floats, package pin).
	Type string
	// Sum is the keyed digest of its whole content (hash.Digest.Sum),
	// which names its snapshot (pin.SnapshotName); "" when not hashed.
	Sum string
}

// ID returns "Kind/name", as refs.Ref.ID.
func (c Config) ID() string { return string(c.Kind) + "/" + c.Name }

// Event is a past restart (or, in dry-run, a restart that would have been)
// of a workload, from its events.k8s.io Events.
type Event struct {
	// Time is when it last happened.
	Time time.Time `json:"time"`
	// Reason is the Event's reason: Restarted, WouldRestart, UpdatedOnDelete.
	Reason string `json:"reason"`
	// Note is the Event's note: what changed (keys and short hashes).
	Note string `json:"note"`
	// Count is how many times the Event was seen (1 at least).
	Count int `json:"count"`
}

// Workload is what was read of one workload.
type Workload struct {
	// Object is the workload as read from the API server, with its pod
	// template.
	Object client.Object
	// Configs are the objects it refers to, by refs.Ref.ID; one missing
	// from the map is taken as absent.
	Configs map[string]Config
	// Events are its restarts, any order.
	Events []Event
	// Producers are the verdicts on the producers of the Secrets of its
	// namespace (package producer's Judge), any order; those of the
	// Secrets it uses are reported.
	Producers []producer.Verdict
	// Missing names the snapshots its pod template pins that were not
	// found ("kind name", as verdict.Pinning.Missing); PinnedBefore, that
	// a revision of it is pinned (a template with neither pins nor label
	// lost them: a replace). The caller reads them, or leaves them empty.
	Missing      []string
	PinnedBefore bool
}

// Path is one place where a workload refers to an object.
type Path struct {
	// Via is env, envFrom, volume or projected (a pod spec reference), or
	// the name of another source ("reload lists").
	Via string `json:"via"`
	// Where names the field ("containers[app].env[LOG_LEVEL]") or the
	// annotation.
	Where string `json:"where,omitempty"`
	// Keys are the keys read there; empty: every key.
	Keys []string `json:"keys,omitempty"`
}

// RuleIgnoredNamespace is the rule reported for a reference into a
// namespace whose kind watcher ignores (IGNORE_CONFIGMAP_NAMESPACES,
// IGNORE_SECRET_NAMESPACES): the resolver leaves it out.
const RuleIgnoredNamespace = "ignored-namespace"

// watched says why watcher does not handle obj, or "" when it does.
func (s Settings) watched(obj client.Object) string {
	if len(s.Namespaces) > 0 && !slices.Contains(s.Namespaces, obj.GetNamespace()) {
		return "its namespace is not watched (--namespaces)"
	}
	if !s.namespaceSelected(obj.GetNamespace()) {
		return notSelected
	}
	if s.WorkloadSelector != nil && !s.WorkloadSelector.Matches(labels.Set(obj.GetLabels())) {
		return "its labels do not match --workload-selector"
	}
	if kind, ok := workload.Of(obj); ok && slices.Contains(s.IgnoredKinds, kind.Name()) {
		return "its kind is ignored (--ignore-workload-kinds)"
	}
	return ""
}

// configWatched says why watcher does not see the object c, or "" when it
// does: watcher then takes it as absent.
func (s Settings) configWatched(c Config) string {
	if len(s.Namespaces) > 0 && !slices.Contains(s.Namespaces, c.Namespace) {
		return "its namespace is not watched (--namespaces)"
	}
	if !s.namespaceSelected(c.Namespace) {
		return notSelected
	}
	if s.ConfigSelector != nil && c.Found && !s.ConfigSelector.Matches(labels.Set(c.Labels)) {
		return "its labels do not match --config-selector"
	}
	return ""
}

// notSelected says why the objects of a namespace that
// --namespace-selector does not match are not handled.
const notSelected = "its namespace's labels do not match --namespace-selector"

// namespaceSelected tells whether namespace is selected, true when that
// cannot be told.
func (s Settings) namespaceSelected(namespace string) bool {
	if s.NamespaceSelector == nil || s.NamespaceLabels == nil {
		return true
	}
	l, ok := s.NamespaceLabels(namespace)
	return !ok || s.NamespaceSelector.Matches(labels.Set(l))
}

// paths returns the places where obj refers to each object, by
// refs.Ref.ID: those of its pod template, then one per other source that
// found the object.
func paths(obj client.Object, origins []resolve.Origin) map[string][]Path {
	out := map[string][]Path{}
	if tmpl, err := workload.PodTemplate(obj); err == nil {
		for _, p := range refs.Paths(&tmpl.Spec) {
			out[p.ID()] = append(out[p.ID()], Path{Via: p.Via, Where: p.Where, Keys: p.Keys})
		}
	}
	for _, o := range origins {
		for _, src := range o.Sources {
			if src != (resolve.PodSpec{}).Name() {
				out[o.Ref.ID()] = append(out[o.Ref.ID()], Path{Via: src, Where: sourceWhere(o.Ref.Kind, src)})
			}
		}
	}
	return out
}

// sourceWhere names where a source other than the pod spec found a
// reference of kind.
func sourceWhere(kind refs.Kind, source string) string {
	if source == (resolve.Annotations{}).Name() {
		if kind == refs.Secret {
			return "annotation secret.reloader.stakater.com/reload"
		}
		return "annotation configmap.reloader.stakater.com/reload"
	}
	return ""
}

// short returns the reported prefix of a keyed hash.
func short(h string) string { return h[:min(len(h), HashPrefix)] }
