package options

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/watcher-dev/watcher/internal/optin"
)

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
	for _, item := range strings.Split(unquote(v), ",") {
		if item = unquote(item); item != "" && !slices.Contains(*a.l, item) {
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
