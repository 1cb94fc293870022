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
//	reloader.stakater.com/search               bool    objects annotated
//	                                                   reloader.stakater.com/match
//	                                                   "true" count (Searched)
//	configmaps.exclude.reloader.stakater.com/reload  names  ConfigMaps that never count
//	secrets.exclude.reloader.stakater.com/reload     names  Secrets that never count
//	deployment.reloader.stakater.com/pause-period    duration  restarts wait for
//	                                                   the period (PausePeriodOf)
//
// As in Reloader, when a workload has none of the annotations that opt in
// (auto, typed auto, reload lists, search), those of its pod template are
// read instead (Effective); exclude lists are read from the workload only.
//
// Auto for a kind (AutoFor) is On when any of its annotations is true, Off
// when none is true and one is false, Unset otherwise. A value that is not a
// boolean counts as absent and is reported (Check): a typo never stops
// restarts silently (Reloader reads it as false).
//
// A reload list is a comma-separated list of regular expressions, each
// anchored (^entry$) as in Reloader; blanks around entries are ignored. An
// entry that does not compile is left out and reported; the others still
// apply.
//
// An exclude list is a comma-separated list of object names, compared
// exactly (blanks around entries are ignored), as in Reloader.
//
// On a ConfigMap or Secret, reloader.stakater.com/ignore: "true" makes its
// changes restart nothing, and reloader.stakater.com/match: "true" makes it
// count for the workloads that search.
package optin

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
)

// WorkloadKeys are the annotations of workloads this package reads, and
// ConfigKeys those of ConfigMaps and Secrets: the cache must keep them.
var (
	WorkloadKeys = []string{Auto, ReloaderAuto, ConfigMapAuto, SecretAuto, ConfigMapReload, SecretReload, Search, ConfigMapExclude, SecretExclude, PausePeriod}
	ConfigKeys   = []string{Ignore, Match}
)

// selecting are the annotations by which a workload opts in: when it has
// none, those of its pod template count (Effective).
var selecting = []string{Auto, ReloaderAuto, ConfigMapAuto, SecretAuto, ConfigMapReload, SecretReload, Search}

// Effective returns the annotations of a workload that this package reads:
// own, unless it has none of the annotations that opt in and its pod
// template does, in which case the template's opting-in annotations are
// added to own (a new map; own is not changed).
func Effective(own, template map[string]string) map[string]string {
	if len(template) == 0 || hasAny(own, selecting) || !hasAny(template, selecting) {
		return own
	}
	out := make(map[string]string, len(own)+len(selecting))
	for k, v := range own {
		out[k] = v
	}
	for _, k := range selecting {
		if v, ok := template[k]; ok {
			out[k] = v
		}
	}
	return out
}

// Of returns the annotations of the workload obj that this package reads
// (Effective). A workload as the store keeps it (a PartialObjectMetadata)
// holds them already: the store's transform applies Effective.
func Of(obj client.Object) map[string]string {
	if _, stored := obj.(*metav1.PartialObjectMetadata); stored {
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

// Searched tells whether a workload whose annotations are ann searches
// (reloader.stakater.com/search "true") and the ConfigMap or Secret whose
// annotations are cfg matches (reloader.stakater.com/match "true").
func Searched(ann, cfg map[string]string) bool {
	return isTrue(ann[Search]) && isTrue(cfg[Match])
}

// Excluded tells whether an exclude list among ann names the object of
// kind called name.
func Excluded(ann map[string]string, kind refs.Kind, name string) bool {
	v, ok := ann[typed(kind, ConfigMapExclude, SecretExclude)]
	if !ok {
		return false
	}
	for _, e := range strings.Split(v, ",") {
		if strings.TrimSpace(e) == name {
			return true
		}
	}
	return false
}

func isTrue(v string) bool {
	b, err := strconv.ParseBool(v)
	return err == nil && b
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
	for _, key := range []string{Auto, ReloaderAuto, typed(kind, ConfigMapAuto, SecretAuto)} {
		v, ok := ann[key]
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
// changes restart nothing. Only a true value does.
func Ignored(ann map[string]string) bool { return isTrue(ann[Ignore]) }

// Named tells whether a reload list among ann names the object of kind
// called name. Invalid entries name nothing.
func Named(ann map[string]string, kind refs.Kind, name string) bool {
	v, ok := ann[typed(kind, ConfigMapReload, SecretReload)]
	return ok && parse(v).matches(name)
}

// Names returns the entries of the reload list of kind among ann that are
// object names (no regular-expression metacharacter other than "."): each
// names that object. A "." also matches any character, as in Reloader: such
// an entry names other objects too, which Named tells.
func Names(ann map[string]string, kind refs.Kind) []string {
	v, ok := ann[typed(kind, ConfigMapReload, SecretReload)]
	if !ok {
		return nil
	}
	return parse(v).names
}

// HasPatterns tells whether the reload list of kind among ann has an entry
// that may name more than one object (one that is not made of the
// characters of names only, or that has a "."): such lists match the
// objects of the workload's namespace (package resolve).
func HasPatterns(ann map[string]string, kind refs.Kind) bool {
	v, ok := ann[typed(kind, ConfigMapReload, SecretReload)]
	return ok && parse(v).wild
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

// Check returns an error for each annotation among ann that is malformed:
// a boolean that is not one, a list entry that does not compile. Values of
// booleans are not quoted (on a Secret they could be anything); list entries
// are, as they are on workloads and name objects.
func Check(ann map[string]string) error {
	var errs []error
	for _, key := range []string{Auto, ReloaderAuto, ConfigMapAuto, SecretAuto, Ignore, Search, Match} {
		if v, ok := ann[key]; ok {
			if _, err := strconv.ParseBool(v); err != nil {
				errs = append(errs, fmt.Errorf("annotation %s is neither true nor false; ignoring it", key))
			}
		}
	}
	if _, err := PausePeriodOf(ann); err != nil {
		errs = append(errs, err)
	}
	for _, key := range []string{ConfigMapReload, SecretReload} {
		if v, ok := ann[key]; ok {
			for _, bad := range parse(v).invalid {
				errs = append(errs, fmt.Errorf("annotation %s: entry %q is not a regular expression; ignoring it", key, bad))
			}
		}
	}
	return errors.Join(errs...)
}

func typed(kind refs.Kind, configMap, secret string) string {
	if kind == refs.Secret {
		return secret
	}
	return configMap
}

// list is a parsed reload list.
type list struct {
	// names are the entries that are object names.
	names []string
	// patterns are the entries, compiled and anchored.
	patterns []*regexp.Regexp
	// invalid are the entries that do not compile.
	invalid []string
	// wild is true when an entry may match more than one name.
	wild bool
}

func (l *list) matches(name string) bool {
	for _, p := range l.patterns {
		if p.MatchString(name) {
			return true
		}
	}
	return false
}

// nameChars are the characters of object names; "." is also a regular
// expression's any character.
var nameChars = regexp.MustCompile(`^[a-z0-9.-]+$`)

// literal are the entries that match one name only.
var literal = regexp.MustCompile(`^[a-z0-9-]+$`)

// parsed caches lists by annotation value: a list is read for every
// reference of every workload handled, and a cluster has few distinct
// lists. The cache is emptied when it holds maxParsed of them.
var (
	parsedMu sync.Mutex
	parsed   = map[string]*list{}
)

const maxParsed = 4096

func parse(v string) *list {
	parsedMu.Lock()
	defer parsedMu.Unlock()
	if l, ok := parsed[v]; ok {
		return l
	}
	l := &list{}
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		re, err := regexp.Compile("^(?:" + e + ")$")
		if err != nil {
			l.invalid = append(l.invalid, e)
			continue
		}
		l.patterns = append(l.patterns, re)
		if nameChars.MatchString(e) {
			l.names = append(l.names, e)
		}
		if !literal.MatchString(e) {
			l.wild = true
		}
	}
	if len(parsed) >= maxParsed {
		parsed = map[string]*list{}
	}
	parsed[v] = l
	return l
}
