package options

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/watcher-dev/watcher/internal/envflag"
)

// origin tells where each setting was read from, for the precedence rules
// of Reloader's flags: the command line first, then the environment.
type origin struct {
	fs *pflag.FlagSet
	// fromEnv maps the name of each flag not on the command line whose
	// environment variable is set to that variable's name.
	fromEnv map[string]string
	getenv  func(string) (string, bool)
}

// onCommandLine tells whether f, or a flag of the same setting, is on the
// command line.
func (s origin) onCommandLine(f *pflag.Flag) bool {
	if f.Changed {
		return true
	}
	return slices.ContainsFunc(f.Annotations[envflag.SameAsAnnotation], s.fs.Changed)
}

// flag tells whether watcher's flag name is on the command line.
func (s origin) flag(name string) bool { return s.onCommandLine(s.fs.Lookup(name)) }

// given tells whether watcher's setting name is on the command line or in
// the environment.
func (s origin) given(name string) bool {
	_, env := s.fromEnv[name]
	return env || s.flag(name)
}

// env returns an environment variable that is set and not empty.
func (s origin) env(name string) (string, bool) {
	v, ok := s.getenv(name)
	v = strings.TrimSpace(v)
	return v, ok && v != ""
}

// note adds a remark to the notes, once.
func (o *Options) note(format string, args ...any) {
	if n := fmt.Sprintf(format, args...); !slices.Contains(o.Notes, n) {
		o.Notes = append(o.Notes, n)
	}
}

// reloaderBoolVars are Reloader's flags declared as booleans in Reloader:
// given alone they are true, and Reloader ignores a word that follows them.
var reloaderBoolVars = map[string]bool{
	"auto-reload-all": true, "enable-ha": true, "sync-after-restart": true,
	"enable-pprof": true, "enable-csi-integration": true,
}

// joinBoolValues rewrites a boolean flag followed by a boolean word
// ("--reload-on-create true", "--enable-ha false") to the one argument
// "--reload-on-create=true", so that the word is read as the flag's value:
// Reloader's charts and deployments write both forms. The value of a flag
// that takes one is left alone, as is everything after "--". A false word
// after one of reloaderBoolVars is noted: Reloader reads the flag alone, as
// true.
func joinBoolValues(fs *pflag.FlagSet, args []string) ([]string, []string) {
	var out, notes []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		out = append(out, a)
		if a == "--" {
			return append(out, args[i+1:]...), notes
		}
		if !strings.HasPrefix(a, "--") || strings.Contains(a, "=") || i+1 == len(args) {
			continue
		}
		f := fs.Lookup(a[2:])
		switch {
		case f == nil:
		case f.NoOptDefVal == "":
			out = append(out, args[i+1]) // the flag's value, whatever it looks like
			i++
		default:
			b, err := strconv.ParseBool(strings.TrimSpace(args[i+1]))
			if err != nil {
				continue
			}
			if !b && reloaderBoolVars[f.Name] {
				notes = append(notes, fmt.Sprintf("%s %s read as %s=false; Reloader itself reads %s alone, as true, and ignores the word after it", a, args[i+1], a, a))
			}
			out[len(out)-1] = a + "=" + args[i+1]
			i++
		}
	}
	return out, notes
}
