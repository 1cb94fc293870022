// Package envflag holds the flags of watcher's settings, each with the
// environment variable that sets it too (Bind), and their values, which
// parse the forms those variables have always used (whole seconds,
// "True"/"False", comma-separated lists, Reloader's selectors) and fail
// with a message that says what form is expected. Package options binds
// the controller's flags with it, and package settings the flags of the
// settings that change what watcher decides, which the CLI binds too.
package envflag

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/watcher-dev/watcher/internal/optin"
)

// EnvAnnotation is the pflag annotation holding a flag's environment
// variable.
const EnvAnnotation = "env"

// SameAsAnnotation names the flags that set the same setting as a flag
// (--restart-on-create and --reload-on-create): one of them on the command
// line is the setting on the command line.
const SameAsAnnotation = "sameAs"

// Bind registers v on fs as the flag name, set by the environment variable
// env too (see package options for which wins).
func Bind(fs *pflag.FlagSet, v pflag.Value, name, env, usage string) {
	fs.Var(v, name, usage)
	_ = fs.SetAnnotation(name, EnvAnnotation, []string{env})
}

// Constructors of the values, each bound to the variable it sets.

// String is a plain string.
func String(s *string) pflag.Value { return (*stringValue)(s) }

// Duration is a Go duration ("2s", "500ms"), at least 0.
func Duration(d *time.Duration) pflag.Value { return duration{d} }

// Seconds is a duration given as a whole number of seconds, at least min.
func Seconds(d *time.Duration, min int) pflag.Value { return seconds{d, min} }

// IntRange is an integer from min to max; what names it in errors.
func IntRange(n *int, min, max int, what string) pflag.Value { return intRange{n, min, max, what} }

// PositiveFloat is a number greater than zero.
func PositiveFloat(f *float64) pflag.Value { return positiveFloat{f} }

// Bool is a boolean in the forms of strconv.ParseBool.
func Bool(b *bool) pflag.Value { return boolean{b} }

// OptionalBool is a boolean that may be left unset (nil).
func OptionalBool(b **bool) pflag.Value { return optionalBool{b} }

// List is a comma-separated list, replaced when given again.
func List(l *[]string) pflag.Value { return list{l} }

// Appending is a list as Reloader's are: added to when given again.
func Appending(l *[]string) pflag.Value { return appending{l} }

// OneOf is a string from allowed.
func OneOf(s *string, allowed ...string) pflag.Value { return oneOf{s, allowed} }

// Aliased is a OneOf that also takes other names of its values.
func Aliased(s *string, allowed []string, aliases map[string]string) pflag.Value {
	return aliased{oneOf{s, allowed}, aliases}
}

// Secret is a string never shown: not in --help, not in errors (IsSecret).
func Secret(s *string) pflag.Value { return secret{s} }

// IsSecret tells whether v is a Secret.
func IsSecret(v pflag.Value) bool {
	_, ok := v.(secret)
	return ok
}

// KeyMap is a list of key=key pairs (optin.Keys).
func KeyMap(m *optin.Keys) pflag.Value { return keyMap{m} }

// Selector is a label selector in Kubernetes' syntax or in Reloader's.
func Selector(s *string) pflag.Value { return namespaceSelector{s} }

// stringValue is a plain string flag.
type stringValue string

func (s *stringValue) String() string     { return string(*s) }
func (s *stringValue) Type() string       { return "string" }
func (s *stringValue) Set(v string) error { *s = stringValue(v); return nil }

// duration is a Go duration ("2s", "500ms").
type duration struct{ d *time.Duration }

func (d duration) String() string { return d.d.String() }
func (d duration) Type() string   { return "duration" }
func (d duration) Set(v string) error {
	x, err := time.ParseDuration(v)
	if err != nil || x < 0 {
		return fmt.Errorf(`want a duration such as "2s" or "500ms", at least 0`)
	}
	*d.d = x
	return nil
}

// The pflag.Value types below parse the forms the environment variables have
// always used (whole seconds, "True"/"False", comma-separated lists) and fail
// with a message that says what form is expected.

// maxSeconds is the longest duration a seconds setting takes: a year.
const maxSeconds = 365 * 24 * 3600

// seconds is a duration given as a whole number of seconds.
type seconds struct {
	d   *time.Duration
	min int
}

func (s seconds) String() string { return strconv.Itoa(int(*s.d / time.Second)) }
func (s seconds) Type() string   { return "seconds" }
func (s seconds) Set(v string) error {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < s.min || n > maxSeconds {
		return fmt.Errorf("want a whole number of seconds from %d to %d", s.min, maxSeconds)
	}
	*s.d = time.Duration(n) * time.Second
	return nil
}

// intRange is an integer between min and max.
type intRange struct {
	n        *int
	min, max int
	what     string
}

func (r intRange) String() string { return strconv.Itoa(*r.n) }
func (r intRange) Type() string   { return "int" }
func (r intRange) Set(v string) error {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < r.min || n > r.max {
		return fmt.Errorf("want %s: a whole number from %d to %d", r.what, r.min, r.max)
	}
	*r.n = n
	return nil
}

// positiveFloat is a number greater than zero.
type positiveFloat struct{ f *float64 }

func (p positiveFloat) String() string { return strconv.FormatFloat(*p.f, 'g', -1, 64) }
func (p positiveFloat) Type() string   { return "float" }
func (p positiveFloat) Set(v string) error {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || f <= 0 {
		return fmt.Errorf("want a number greater than 0")
	}
	*p.f = f
	return nil
}

// boolean accepts what strconv.ParseBool does: True, False, true, 1, 0...
type boolean struct{ b *bool }

func (b boolean) String() string   { return strconv.FormatBool(*b.b) }
func (b boolean) Type() string     { return "bool" }
func (b boolean) IsBoolFlag() bool { return true }
func (b boolean) Set(v string) error {
	x, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return fmt.Errorf("want True or False")
	}
	*b.b = x
	return nil
}

// optionalBool is a boolean that may be left unset (nil).
type optionalBool struct{ b **bool }

func (o optionalBool) String() string {
	if *o.b == nil {
		return ""
	}
	return strconv.FormatBool(**o.b)
}
func (o optionalBool) Type() string { return "True|False" }
func (o optionalBool) Set(v string) error {
	if strings.TrimSpace(v) == "" {
		*o.b = nil
		return nil
	}
	x, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return fmt.Errorf("want True, False or empty")
	}
	*o.b = &x
	return nil
}

// list is a comma-separated list; blanks around items are dropped.
type list struct{ l *[]string }

func (l list) String() string { return strings.Join(*l.l, ",") }
func (l list) Type() string   { return "list" }
func (l list) Set(v string) error {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	*l.l = out
	return nil
}

// appending is a list flag as Reloader's are (pflag's StringSlice, read as
// CSV): comma-separated, each item and the whole value stripped of one
// pair of double quotes, and added to when given again. Its setting starts
// empty.
type appending struct{ l *[]string }

func (a appending) String() string { return strings.Join(*a.l, ",") }
func (a appending) Type() string   { return "list" }
func (a appending) Set(v string) error {
	for _, item := range strings.Split(Unquote(v), ",") {
		if item = Unquote(item); item != "" && !slices.Contains(*a.l, item) {
			*a.l = append(*a.l, item)
		}
	}
	return nil
}

// oneOf is a string from a fixed set.
type oneOf struct {
	s       *string
	allowed []string
}

func (o oneOf) String() string { return *o.s }
func (o oneOf) Type() string   { return strings.Join(o.allowed, "|") }
func (o oneOf) Set(v string) error {
	v = strings.ToLower(strings.TrimSpace(v))
	for _, a := range o.allowed {
		if v == a {
			*o.s = v
			return nil
		}
	}
	return fmt.Errorf("want one of %s", strings.Join(o.allowed, ", "))
}

// aliased is a oneOf that also takes other names of its values.
type aliased struct {
	oneOf
	aliases map[string]string
}

func (a aliased) Set(v string) error {
	if to, ok := a.aliases[strings.ToLower(strings.TrimSpace(v))]; ok {
		v = to
	}
	return a.oneOf.Set(v)
}

// secret is a string that is never shown: not in --help, not in errors.
type secret struct{ s *string }

func (s secret) String() string     { return "" }
func (s secret) Type() string       { return "string" }
func (s secret) Set(v string) error { *s.s = v; return nil }

// keyMap is a comma-separated list of key=value pairs (annotation keys
// renamed: watcher's=the installation's, see optin.Keys); empty: none.
type keyMap struct{ m *optin.Keys }

func (k keyMap) String() string {
	var out []string
	for _, own := range slices.Sorted(maps.Keys(*k.m)) {
		out = append(out, own+"="+(*k.m)[own])
	}
	return strings.Join(out, ",")
}
func (k keyMap) Type() string { return "key=key,..." }
func (k keyMap) Set(v string) error {
	m := optin.Keys{}
	for _, pair := range strings.Split(v, ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		own, theirs, ok := strings.Cut(pair, "=")
		if !ok || strings.TrimSpace(own) == "" || strings.TrimSpace(theirs) == "" {
			return fmt.Errorf("want watcher's key=the key read in its place, comma-separated, such as %s=example.com/auto", optin.ReloaderAuto)
		}
		m[strings.TrimSpace(own)] = strings.TrimSpace(theirs)
	}
	if len(m) == 0 {
		m = nil
	}
	*k.m = m
	return nil
}

// namespaceSelector is --namespace-selector: a label selector of the
// namespaces watched, in Kubernetes' syntax or in Reloader's (key:value,
// key:*, key=*), converted as ReloaderSelector converts Reloader's
// --resource-label-selector. Reloader's flag is a list: given more than
// once, every selector must match. One pair of double quotes around the
// value or an item is removed: Reloader's chart renders
// --namespace-selector="team:a", which Reloader reads as CSV.
type namespaceSelector struct{ s *string }

func (n namespaceSelector) String() string { return *n.s }
func (n namespaceSelector) Type() string   { return "selector" }
func (n namespaceSelector) Set(v string) error {
	items := strings.Split(Unquote(v), ",")
	for i := range items {
		items[i] = Unquote(items[i])
	}
	sel, err := ReloaderSelector(items)
	if err != nil {
		return err
	}
	if *n.s != "" && sel != "" {
		sel = *n.s + "," + sel
	}
	*n.s = sel
	return nil
}

// Unquote removes one pair of double quotes around s, as Reloader's chart
// renders --namespace-selector="team:a" and Reloader's list flags (CSV)
// read it.
func Unquote(s string) string {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return strings.TrimSpace(s[1 : len(s)-1])
	}
	return s
}

// ReloaderSelector converts Reloader's label selectors (key:value,
// key:* and key=* beside the usual forms) to one label selector, as
// Reloader's GetResourceLabelSelector does.
func ReloaderSelector(items []string) (string, error) {
	out := make([]string, 0, len(items))
	for _, kv := range items {
		if k, v, ok := strings.Cut(kv, ":"); ok {
			kv = k + "=" + v
		}
		if k, v, ok := strings.Cut(kv, "="); ok && v == "*" {
			kv = k
		}
		out = append(out, kv)
	}
	sel := strings.Join(out, ",")
	if _, err := labels.Parse(sel); err != nil {
		return "", err
	}
	return sel, nil
}
