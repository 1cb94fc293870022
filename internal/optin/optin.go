// Package optin reads the annotations by which a workload opts in to
// restarts, or out of them, and names ConfigMaps and Secrets to restart for:
// watcher's own watcher.dev/auto, and Reloader's (github.com/stakater/Reloader)
// with Reloader's meaning, so that a cluster running Reloader switches to
// watcher without editing a manifest.
//
// On a workload:
//
//	annotation                                 value   says, of references of
//	watcher.dev/auto                           bool    both kinds: auto on/off
//	reloader.stakater.com/auto                 bool    both kinds: auto on/off
//	configmap.reloader.stakater.com/auto       bool    ConfigMaps: auto on/off
//	secret.reloader.stakater.com/auto          bool    Secrets: auto on/off
//	configmap.reloader.stakater.com/reload     list    ConfigMaps it names count
//	secret.reloader.stakater.com/reload        list    Secrets it names count
//	reloader.stakater.com/search               "true"  objects annotated
//	                                                   reloader.stakater.com/match
//	                                                   "true" count (Searched)
//	configmaps.exclude.reloader.stakater.com/reload  names  ConfigMaps that never count
//	secrets.exclude.reloader.stakater.com/reload     names  Secrets that never count
//	deployment.reloader.stakater.com/pause-period    duration  restarts wait for
//	                                                   the period (PausePeriodOf)
//	secretproviderclass.reloader.stakater.com/auto   bool  SecretProviderClasses
//	secretproviderclass.reloader.stakater.com/reload list  (package csi), with the
//	secretproviderclasses.exclude.reloader.stakater.com/reload  names  meaning of the
//	                                                   secret.* keys for Secrets
//
// As in Reloader (pkg/common ShouldReload), the pod template's annotations
// are read per kind of referenced object: for ConfigMaps, when the workload
// has none of watcher.dev/auto, reloader.stakater.com/auto,
// configmap.reloader.stakater.com/auto, configmap.reloader.stakater.com/reload
// and reloader.stakater.com/search, those of its pod template are read
// instead (Effective keeps them); likewise for Secrets with the secret.*
// keys. Exclude lists and the pause period are read from the workload only.
//
//	workload has             template has              ConfigMaps read  Secrets read
//	nothing                  configmap reload list     template         template
//	secret reload list       configmap reload list     template         workload
//	reloader auto            configmap reload list     workload         workload
//	configmap auto: false    reloader auto: true       workload         template
//
// Auto for a kind (AutoFor) is On when any of its annotations is true, Off
// when none is true and one is false, Unset otherwise. Auto values are read
// as Go booleans ("true", "1", "False"...), as Reloader reads them; a value
// that is not a boolean counts as absent and is reported (Check): a typo
// never stops restarts silently (Reloader reads it as false). Reloader's
// other booleans (search, match, ignore) are true only when exactly "true",
// as in Reloader; any other value but "false" is reported.
//
// A reload list is a comma-separated list of regular expressions, each
// anchored (^entry$) as in Reloader; blanks around entries are ignored. An
// entry that does not compile is left out and reported; the others still
// apply. Names need no regular expression (see the table in list.go), and a
// list over the limits (MaxListBytes, MaxListEntries, MaxEntryBytes,
// MaxPatternProgram, MaxListProgram) is refused whole and reported.
//
// An exclude list is a comma-separated list of object names, compared
// exactly (blanks around entries are ignored), as in Reloader; one over
// MaxListBytes, MaxListEntries or MaxEntryBytes excludes nothing and is
// reported.
//
// On a ConfigMap or Secret, reloader.stakater.com/ignore: "true" makes its
// changes restart nothing, and reloader.stakater.com/match: "true" makes it
// count for the workloads that search.
package optin

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/packed"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/workload"
)

// The annotations read, on workloads and on ConfigMaps and Secrets.
const (
	Auto             = "watcher.dev/auto"
	ReloaderAuto     = "reloader.stakater.com/auto"
	ConfigMapAuto    = "configmap.reloader.stakater.com/auto"
	SecretAuto       = "secret.reloader.stakater.com/auto"
	ConfigMapReload  = "configmap.reloader.stakater.com/reload"
	SecretReload     = "secret.reloader.stakater.com/reload"
	Ignore           = "reloader.stakater.com/ignore"
	Search           = "reloader.stakater.com/search"
	Match            = "reloader.stakater.com/match"
	ConfigMapExclude = "configmaps.exclude.reloader.stakater.com/reload"
	SecretExclude    = "secrets.exclude.reloader.stakater.com/reload"
	PausePeriod      = "deployment.reloader.stakater.com/pause-period"
	// RolloutStrategy, on an Argo Rollout, is Reloader's choice of how it
	// is restarted: "restart" sets spec.restartAt (watcher's evict
	// strategy for a Rollout), "rollout" (the default) changes its pod
	// template; see restart.For.
	RolloutStrategy = "reloader.stakater.com/rollout-strategy"
	// Reloader's annotations for SecretProviderClasses (package csi).
	SecretProviderClassAuto    = "secretproviderclass.reloader.stakater.com/auto"
	SecretProviderClassReload  = "secretproviderclass.reloader.stakater.com/reload"
	SecretProviderClassExclude = "secretproviderclasses.exclude.reloader.stakater.com/reload"
)

// fromTemplate prefixes, in what Effective returns, the opting-in
// annotations of the pod template. A key with two slashes is no valid
// annotation key: no object can carry one.
const fromTemplate = "watcher.dev/cached/template/"

// selecting are the annotations by which a workload opts in, each kind its
// own: when it has none of a kind's, its pod template's count for that
// kind (Effective).
var selecting = map[refs.Kind][]string{
	refs.ConfigMap:           {Auto, ReloaderAuto, ConfigMapAuto, ConfigMapReload, Search},
	refs.Secret:              {Auto, ReloaderAuto, SecretAuto, SecretReload, Search},
	refs.SecretProviderClass: {Auto, ReloaderAuto, SecretProviderClassAuto, SecretProviderClassReload, Search},
}

// templateKeys are the keys under which Effective keeps the pod
// template's annotations.
var templateKeys = []string{fromTemplate + Auto, fromTemplate + ReloaderAuto, fromTemplate + ConfigMapAuto, fromTemplate + SecretAuto,
	fromTemplate + ConfigMapReload, fromTemplate + SecretReload, fromTemplate + Search,
	fromTemplate + SecretProviderClassAuto, fromTemplate + SecretProviderClassReload, fromTemplate + ChangeSet, fromTemplate + pin.PinsAnnotation}

// kinds are the kinds of references, in the order selecting is read.
var kinds = []refs.Kind{refs.ConfigMap, refs.Secret, refs.SecretProviderClass}

// WorkloadKeys are the annotations of workloads this package reads (and
// those Effective adds), and ConfigKeys those of ConfigMaps and Secrets:
// the cache must keep them.
var (
	WorkloadKeys = append([]string{Auto, ReloaderAuto, ConfigMapAuto, SecretAuto, ConfigMapReload, SecretReload, Search, ConfigMapExclude, SecretExclude, PausePeriod, Settle, SettleMax, RefreshSiblings, RecordedChangeSet, RolloutStrategy,
		SecretProviderClassAuto, SecretProviderClassReload, SecretProviderClassExclude, pin.Annotation, pin.RolledBackFrom}, templateKeys...)
	ConfigKeys = []string{Ignore, Match, ChangeSet}
)

// Effective returns the annotations of a workload that this package reads:
// own and, for each kind of which own has no opting-in annotation, the pod
// template's opting-in annotations of that kind, kept under a prefix that
// no object can carry, so that the readers of this package read them for
// that kind only (see the package comment). own is not changed; it is
// returned as is when the template adds nothing.
func Effective(own, template map[string]string) map[string]string {
	var out map[string]string
	for _, kind := range kinds {
		if hasAny(own, selecting[kind]) {
			continue
		}
		for _, k := range selecting[kind] {
			v, ok := template[k]
			if !ok {
				continue
			}
			if out == nil {
				out = make(map[string]string, len(own)+len(selecting[kind]))
				for k, v := range own {
					out[k] = v
				}
			}
			out[fromTemplate+k] = v
		}
	}
	for _, k := range []string{ChangeSet, pin.PinsAnnotation} {
		v, ok := template[k]
		if !ok {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(own)+2)
			for k, v := range own {
				out[k] = v
			}
		}
		out[fromTemplate+k] = v
	}
	if out == nil {
		return own
	}
	return out
}

// Of returns the annotations of the workload obj that this package reads
// (Effective). A workload as the store keeps it (a PartialObjectMetadata,
// or packed) holds them already: the store's transform applies Effective.
func Of(obj client.Object) map[string]string {
	switch obj.(type) {
	case *metav1.PartialObjectMetadata, *packed.Object:
		return obj.GetAnnotations()
	}
	kind, ok := workload.Of(obj)
	if !ok {
		return obj.GetAnnotations()
	}
	tmpl, err := kind.PodTemplate(obj)
	if err != nil || tmpl == nil {
		return obj.GetAnnotations()
	}
	return Effective(obj.GetAnnotations(), tmpl.Annotations)
}

func hasAny(ann map[string]string, keys []string) bool {
	for _, k := range keys {
		if _, ok := ann[k]; ok {
			return true
		}
	}
	return false
}

// lookup returns the opting-in annotation key that counts for references
// of kind: the workload's, or its pod template's when the workload has none
// of that kind's (Effective).
func lookup(ann map[string]string, kind refs.Kind, key string) (string, bool) {
	if !hasAny(ann, selecting[kind]) {
		key = fromTemplate + key
	}
	v, ok := ann[key]
	return v, ok
}

// For returns the annotations among ann (as Effective returns them) that
// count for references of kind, with the pod template's under their own
// keys: ann itself when no template annotation was kept.
func For(ann map[string]string, kind refs.Kind) map[string]string {
	if !hasAny(ann, templateKeys) {
		return ann
	}
	fallback := !hasAny(ann, selecting[kind])
	out := make(map[string]string, len(ann))
	for k, v := range ann {
		if !strings.HasPrefix(k, fromTemplate) {
			out[k] = v
		}
	}
	if fallback {
		for _, k := range selecting[kind] {
			if v, ok := ann[fromTemplate+k]; ok {
				out[k] = v
			}
		}
	}
	return out
}

// Searched tells whether a workload whose annotations are ann (For the
// kind of the object: the pod template's are not read here) searches
// (reloader.stakater.com/search "true") and the ConfigMap or Secret whose
// annotations are cfg matches (reloader.stakater.com/match "true"). Both
// compare exactly, as in Reloader.
func Searched(ann, cfg map[string]string) bool {
	return ann[Search] == "true" && cfg[Match] == "true"
}

// Excluded tells whether an exclude list among ann names the object of
// kind called name. A list over the limits excludes nothing.
func Excluded(ann map[string]string, kind refs.Kind, name string) bool {
	v, ok := ann[typed(kind, ConfigMapExclude, SecretExclude, SecretProviderClassExclude)]
	if !ok || precheck(v) != nil {
		return false
	}
	for e := range strings.SplitSeq(v, ",") {
		if strings.TrimSpace(e) == name {
			return true
		}
	}
	return false
}

// Setting is what a workload's auto annotations say of a kind.
type Setting int

// The settings.
const (
	Unset Setting = iota
	On
	Off
)

// AutoFor returns what the auto annotations among ann say of references of
// kind (see the package comment).
func AutoFor(ann map[string]string, kind refs.Kind) Setting {
	s := Unset
	for _, key := range []string{Auto, ReloaderAuto, typed(kind, ConfigMapAuto, SecretAuto, SecretProviderClassAuto)} {
		v, ok := lookup(ann, kind, key)
		if !ok {
			continue
		}
		b, err := strconv.ParseBool(v)
		switch {
		case err != nil:
		case b:
			return On
		default:
			s = Off
		}
	}
	return s
}

// Ignored tells whether the annotations of a ConfigMap or Secret say its
// changes restart nothing. Only "true" does, as in Reloader.
func Ignored(ann map[string]string) bool { return ann[Ignore] == "true" }

// reloadList returns the parsed reload list of kind among ann; nil when
// there is none.
func reloadList(ann map[string]string, kind refs.Kind) *parsedList {
	v, ok := lookup(ann, kind, typed(kind, ConfigMapReload, SecretReload, SecretProviderClassReload))
	if !ok {
		return nil
	}
	return parse(v)
}

// Named tells whether a reload list among ann names the object of kind
// called name. Invalid entries, and lists over the limits, name nothing.
func Named(ann map[string]string, kind refs.Kind, name string) bool {
	l := reloadList(ann, kind)
	return l != nil && l.matches(name)
}

// Names returns the entries of the reload list of kind among ann that are
// object names (no regular-expression metacharacter other than "."): each
// names that object. A "." also matches any character, as in Reloader: such
// an entry names other objects too, which Named tells.
func Names(ann map[string]string, kind refs.Kind) []string {
	if l := reloadList(ann, kind); l != nil {
		return l.names
	}
	return nil
}

// HasPatterns tells whether the reload list of kind among ann has an entry
// that may name more than one object (one that is not made of the
// characters of names only, or that has a "."): such lists match the
// objects of the workload's namespace (package resolve).
func HasPatterns(ann map[string]string, kind refs.Kind) bool {
	l := reloadList(ann, kind)
	return l != nil && l.wild
}

// Matcher returns Named for ann and kind with the list parsed once, for
// matching many names; nil when the list has no entry that may name more
// than one object (HasPatterns).
func Matcher(ann map[string]string, kind refs.Kind) func(name string) bool {
	l := reloadList(ann, kind)
	if l == nil || !l.wild {
		return nil
	}
	return l.matches
}

// PausePeriodOf reads a workload's pause period (Reloader's
// deployment.reloader.stakater.com/pause-period, a Go duration such as
// "5m"): its restarts wait until the period, counted from the first, ends,
// so that the changes made meanwhile roll out once (package guard). Zero
// when absent; an error, and zero, when it is not a positive duration.
func PausePeriodOf(ann map[string]string) (time.Duration, error) {
	v, ok := ann[PausePeriod]
	if !ok {
		return 0, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("annotation %s is not a positive duration such as 5m; restarting without a pause", PausePeriod)
	}
	return d, nil
}

// The settle annotations of a workload (package guard's Settles): how
// long its changed sources must have been quiet before it restarts, and
// the longest it waits from the first change.
const (
	Settle    = "watcher.dev/settle"
	SettleMax = "watcher.dev/settle-max"
)

// ChangeSet names the change a ConfigMap, a Secret or a pod template
// belongs to (a Helm release revision, a CI build id): the sources of one
// workload wait for each other until they carry the same (package hold),
// and a workload whose own template is of the newest one rolls out for
// it, with no restart added. RecordedChangeSet, on a workload, is its
// template's ChangeSet when watcher last wrote its record.
const (
	ChangeSet         = "watcher.dev/change-set"
	RecordedChangeSet = "watcher.dev/recorded-change-set"
)

// MaxChangeSet bounds a ChangeSet: a longer one counts as none.
const MaxChangeSet = 63

// ChangeSetOf returns the ChangeSet of annotations ann: "" when absent or
// longer than MaxChangeSet.
func ChangeSetOf(ann map[string]string) string {
	if v := ann[ChangeSet]; len(v) <= MaxChangeSet {
		return v
	}
	return ""
}

// TemplateChangeSet returns the ChangeSet of the pod template of a
// workload whose annotations, as Effective returns them, are ann.
func TemplateChangeSet(ann map[string]string) string {
	if v := ann[fromTemplate+ChangeSet]; len(v) <= MaxChangeSet {
		return v
	}
	return ""
}

// TemplatePins returns the pins of the workload's pod template
// (pin.PinsAnnotation), from the annotations Effective returns.
func TemplatePins(ann map[string]string) pin.Pins {
	return pin.Parse(ann[fromTemplate+pin.PinsAnnotation])
}

// RefreshSiblings, "true" on a workload, asks the other ExternalSecrets
// writing its Secrets to sync when one of them changed (package hold).
const RefreshSiblings = "watcher.dev/refresh-siblings"

// RefreshSiblingsOf reads RefreshSiblings: false when absent; an error,
// and false, when it is not a boolean.
func RefreshSiblingsOf(ann map[string]string) (bool, error) {
	v, ok := ann[RefreshSiblings]
	if !ok {
		return false, nil
	}
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return false, fmt.Errorf("annotation %s %.40q is not true or false; not refreshing", RefreshSiblings, v)
	}
	return b, nil
}

// MaxSettle bounds both settle annotations: a restart never waits longer
// for its change set.
const MaxSettle = time.Hour

// SettleOf reads a workload's settle annotations: zero for one absent;
// an error, and zero for both, when one is not a duration from 0 to
// MaxSettle.
func SettleOf(ann map[string]string) (quiet, maxWait time.Duration, err error) {
	var out [2]time.Duration
	for i, key := range []string{Settle, SettleMax} {
		v, ok := ann[key]
		if !ok {
			continue
		}
		d, perr := time.ParseDuration(strings.TrimSpace(v))
		if perr != nil || d < 0 || d > MaxSettle {
			return 0, 0, fmt.Errorf("annotation %s %.40q is not a duration from 0s to %s such as 1m; using the installation's settle", key, v, MaxSettle)
		}
		out[i] = d
	}
	return out[0], out[1], nil
}

func typed(kind refs.Kind, configMap, secret, class string) string {
	switch kind {
	case refs.Secret:
		return secret
	case refs.SecretProviderClass:
		return class
	}
	return configMap
}
