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
// On a ConfigMap or Secret, reloader.stakater.com/ignore: "true" makes its
// changes restart nothing.
package optin

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/watcher-dev/watcher/internal/refs"
)

// The annotations read, on workloads and on ConfigMaps and Secrets.
const (
	Auto            = "watcher.dev/auto"
	ReloaderAuto    = "reloader.stakater.com/auto"
	ConfigMapAuto   = "configmap.reloader.stakater.com/auto"
	SecretAuto      = "secret.reloader.stakater.com/auto"
	ConfigMapReload = "configmap.reloader.stakater.com/reload"
	SecretReload    = "secret.reloader.stakater.com/reload"
	Ignore          = "reloader.stakater.com/ignore"
)

// WorkloadKeys are the annotations of workloads this package reads, and
// ConfigKeys those of ConfigMaps and Secrets: the cache must keep them.
var (
	WorkloadKeys = []string{Auto, ReloaderAuto, ConfigMapAuto, SecretAuto, ConfigMapReload, SecretReload}
	ConfigKeys   = []string{Ignore}
)

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
func Ignored(ann map[string]string) bool {
	b, err := strconv.ParseBool(ann[Ignore])
	return err == nil && b
}

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

// Check returns an error for each annotation among ann that is malformed:
// a boolean that is not one, a list entry that does not compile. Values of
// booleans are not quoted (on a Secret they could be anything); list entries
// are, as they are on workloads and name objects.
func Check(ann map[string]string) error {
	var errs []error
	for _, key := range []string{Auto, ReloaderAuto, ConfigMapAuto, SecretAuto, Ignore} {
		if v, ok := ann[key]; ok {
			if _, err := strconv.ParseBool(v); err != nil {
				errs = append(errs, fmt.Errorf("annotation %s is neither true nor false; ignoring it", key))
			}
		}
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
	}
	if len(parsed) >= maxParsed {
		parsed = map[string]*list{}
	}
	parsed[v] = l
	return l
}
