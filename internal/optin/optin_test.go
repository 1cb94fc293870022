package optin_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/refs"
)

// TestAutoFor: one case per documented Reloader example, and per row of
// the package table.
func TestAutoFor(t *testing.T) {
	tests := []struct {
		name      string
		ann       map[string]string
		configMap optin.Setting
		secret    optin.Setting
	}{
		{"none", nil, optin.Unset, optin.Unset},
		{"reloader.stakater.com/auto: true: both kinds", map[string]string{optin.ReloaderAuto: "true"}, optin.On, optin.On},
		{"watcher.dev/auto: true: both kinds", map[string]string{optin.Auto: "true"}, optin.On, optin.On},
		{"reloader.stakater.com/auto: false", map[string]string{optin.ReloaderAuto: "false"}, optin.Off, optin.Off},
		{"watcher.dev/auto: false", map[string]string{optin.Auto: "false"}, optin.Off, optin.Off},
		{"configmap.reloader.stakater.com/auto: true: ConfigMaps only", map[string]string{optin.ConfigMapAuto: "true"}, optin.On, optin.Unset},
		{"secret.reloader.stakater.com/auto: true: Secrets only", map[string]string{optin.SecretAuto: "true"}, optin.Unset, optin.On},
		{"auto false, secret auto true: Secrets still on", map[string]string{optin.ReloaderAuto: "false", optin.SecretAuto: "true"}, optin.Off, optin.On},
		{"one true wins over another false", map[string]string{optin.Auto: "false", optin.ReloaderAuto: "true"}, optin.On, optin.On},
		{"True and 1 are true", map[string]string{optin.Auto: "True", optin.SecretAuto: "1"}, optin.On, optin.On},
		{"malformed counts as absent", map[string]string{optin.ReloaderAuto: "yes"}, optin.Unset, optin.Unset},
		{"malformed next to false", map[string]string{optin.ReloaderAuto: "yes", optin.ConfigMapAuto: "false"}, optin.Off, optin.Unset},
		{"another key", map[string]string{"auto": "true"}, optin.Unset, optin.Unset},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := optin.AutoFor(tt.ann, refs.ConfigMap); got != tt.configMap {
				t.Errorf("ConfigMaps: %v, want %v", got, tt.configMap)
			}
			if got := optin.AutoFor(tt.ann, refs.Secret); got != tt.secret {
				t.Errorf("Secrets: %v, want %v", got, tt.secret)
			}
		})
	}
}

// TestIgnored: only "true" ignores, as in Reloader.
func TestIgnored(t *testing.T) {
	for v, want := range map[string]bool{"true": true, "True": false, "TRUE": false, "1": false, "t": false, "false": false, "": false, "yes": false} {
		if got := optin.Ignored(map[string]string{optin.Ignore: v}); got != want {
			t.Errorf("Ignored(%q) = %v, want %v", v, got, want)
		}
	}
	if optin.Ignored(nil) {
		t.Error("Ignored(nil) = true")
	}
}

// TestReloadLists: Reloader's documented examples, and the anchoring.
func TestReloadLists(t *testing.T) {
	tests := []struct {
		name    string
		list    string
		names   []string // optin.Names
		match   []string
		noMatch []string
	}{
		{"one name", "foo-configmap", []string{"foo-configmap"}, []string{"foo-configmap"}, []string{"foo", "foo-configmap-2", "a-foo-configmap"}},
		{"several names", "foo-configmap,bar-configmap,baz-configmap", []string{"foo-configmap", "bar-configmap", "baz-configmap"}, []string{"bar-configmap", "baz-configmap"}, []string{"foo-configmap,bar-configmap"}},
		{"blanks around entries", " foo , bar ,", []string{"foo", "bar"}, []string{"foo", "bar"}, []string{" foo", ""}},
		{"a pattern", "app-.*-config", nil, []string{"app-web-config", "app--config"}, []string{"app-config", "xapp-web-config", "app-web-config2"}},
		{"anchored as a whole: a|b", "a|b", nil, []string{"a", "b"}, []string{"ab", "xb", "ax"}},
		{"a dot: a name, and any character", "app.config", []string{"app.config"}, []string{"app.config", "app-config"}, []string{"appconfig"}},
		{"an invalid entry is left out, the others apply", "good,bad[,also-good", []string{"good", "also-good"}, []string{"good", "also-good"}, []string{"bad["}},
		{"empty", "", nil, nil, []string{"", "a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ann := map[string]string{optin.ConfigMapReload: tt.list}
			if diff := cmp.Diff(tt.names, optin.Names(ann, refs.ConfigMap)); diff != "" {
				t.Errorf("Names (-want +got):\n%s", diff)
			}
			if got := optin.Names(ann, refs.Secret); got != nil {
				t.Errorf("the ConfigMap list names Secrets: %v", got)
			}
			for _, n := range tt.match {
				if !optin.Named(ann, refs.ConfigMap, n) {
					t.Errorf("%q does not name %q", tt.list, n)
				}
				if optin.Named(ann, refs.Secret, n) {
					t.Errorf("the ConfigMap list names the Secret %q", n)
				}
			}
			for _, n := range tt.noMatch {
				if optin.Named(ann, refs.ConfigMap, n) {
					t.Errorf("%q names %q", tt.list, n)
				}
			}
		})
	}
	sec := map[string]string{optin.SecretReload: "foo-secret"}
	if !optin.Named(sec, refs.Secret, "foo-secret") || optin.Named(sec, refs.ConfigMap, "foo-secret") {
		t.Error("secret.reloader.stakater.com/reload names Secrets, and only them")
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		ann  map[string]string
		want []string // substrings of the error; none: no error
	}{
		{"none", nil, nil},
		{"valid", map[string]string{optin.ReloaderAuto: "true", optin.Ignore: "false", optin.SecretReload: "a,b-.*"}, nil},
		{"auto not a boolean", map[string]string{optin.ReloaderAuto: "hunter2"}, []string{optin.ReloaderAuto, "neither true nor false"}},
		{"pin not a boolean", map[string]string{pin.Annotation: "yes"}, []string{pin.Annotation, "not pinning"}},
		{"pin true", map[string]string{pin.Annotation: "true"}, nil},
		{"ignore not a boolean", map[string]string{optin.Ignore: "hunter2"}, []string{optin.Ignore}},
		{"invalid entry", map[string]string{optin.ConfigMapReload: "ok,(bad"}, []string{optin.ConfigMapReload, `"(bad"`}},
		{"both reported", map[string]string{optin.SecretAuto: "x", optin.SecretReload: "*"}, []string{optin.SecretAuto, optin.SecretReload, `"*"`}},
		{"Reloader's booleans are exactly true or false", map[string]string{optin.Search: "True", optin.Match: "1", optin.Ignore: "hunter2"},
			[]string{optin.Search, optin.Match, optin.Ignore, "compared exactly", "reading it as false"}},
		{"exactly true and false are fine", map[string]string{optin.Search: "true", optin.Match: "false", optin.Ignore: "true"}, nil},
		{"a template's annotation is named so", optin.Effective(nil, map[string]string{optin.ReloaderAuto: "yes"}),
			[]string{"pod template annotation " + optin.ReloaderAuto}},
		{"at most 3 invalid entries quoted", map[string]string{optin.ConfigMapReload: "(1,(2,(3,(4,(5"},
			[]string{`"(1"`, `"(3"`, "2 more entries are not regular expressions"}},
		{"a long invalid entry is cut", map[string]string{optin.ConfigMapReload: "(" + strings.Repeat("é", 100)},
			[]string{`"(` + strings.Repeat("é", 19) + `"…`}},
		{"a list over the limits", map[string]string{optin.SecretReload: strings.Repeat("a,", optin.MaxListEntries+1)},
			[]string{optin.SecretReload, "more than 256 entries", "ignoring the whole list"}},
		{"an exclude list over the limits", map[string]string{optin.ConfigMapExclude: strings.Repeat("a", optin.MaxEntryBytes+1)},
			[]string{optin.ConfigMapExclude, "an entry of 254 bytes", "ignoring the whole list"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := optin.Check(tt.ann)
			if (err != nil) != (tt.want != nil) {
				t.Fatalf("Check() = %v, want an error: %v", err, tt.want != nil)
			}
			for _, s := range tt.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q quotes a boolean's value", err)
			}
			if err != nil && strings.Contains(err.Error(), `"(4"`) {
				t.Errorf("error %q quotes more than 3 entries", err)
			}
		})
	}
}

// TestExcluded: exclude lists name objects exactly, as in Reloader (no
// patterns), each kind its own list.
func TestExcluded(t *testing.T) {
	ann := map[string]string{optin.ConfigMapExclude: "foo-configmap, bar-.*", optin.SecretExclude: "foo-secret"}
	tests := []struct {
		kind refs.Kind
		name string
		want bool
	}{
		{refs.ConfigMap, "foo-configmap", true},
		{refs.ConfigMap, "bar-.*", true},
		{refs.ConfigMap, "bar-x", false},
		{refs.ConfigMap, "foo-secret", false},
		{refs.Secret, "foo-secret", true},
		{refs.Secret, "foo-configmap", false},
	}
	for _, tt := range tests {
		if got := optin.Excluded(ann, tt.kind, tt.name); got != tt.want {
			t.Errorf("Excluded(%s %s) = %v, want %v", tt.kind, tt.name, got, tt.want)
		}
	}
	if optin.Excluded(nil, refs.ConfigMap, "") {
		t.Error("no list excludes nothing")
	}
}

// TestSearched: search on the workload and match on the object, both true.
// TestSearched: search on the workload and match on the object, both
// exactly "true", as in Reloader.
func TestSearched(t *testing.T) {
	tests := []struct {
		name          string
		workload, cfg map[string]string
		want          bool
	}{
		{"search and match", map[string]string{optin.Search: "true"}, map[string]string{optin.Match: "true"}, true},
		{"search, no match", map[string]string{optin.Search: "true"}, nil, false},
		{"match, no search", nil, map[string]string{optin.Match: "true"}, false},
		{"search false", map[string]string{optin.Search: "false"}, map[string]string{optin.Match: "true"}, false},
		{"match malformed", map[string]string{optin.Search: "true"}, map[string]string{optin.Match: "yes"}, false},
		{"match True", map[string]string{optin.Search: "true"}, map[string]string{optin.Match: "True"}, false},
		{"match 1", map[string]string{optin.Search: "true"}, map[string]string{optin.Match: "1"}, false},
		{"search True", map[string]string{optin.Search: "True"}, map[string]string{optin.Match: "true"}, false},
		{"search 1", map[string]string{optin.Search: "1"}, map[string]string{optin.Match: "true"}, false},
	}
	for _, tt := range tests {
		if got := optin.Searched(tt.workload, tt.cfg); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestEffective: the pod template's opting-in annotations count per kind,
// for the kinds of which the workload has none (Reloader's ShouldReload);
// exclude lists are the workload's.
func TestEffective(t *testing.T) {
	type view struct {
		auto             optin.Setting
		named, searching bool // "cfg" named; search "true"
	}
	tests := []struct {
		name              string
		own, tmpl         map[string]string
		configMap, secret view
	}{
		{"none anywhere", map[string]string{"a": "b"}, map[string]string{"other": "y"},
			view{}, view{}},
		{"template only: both kinds", nil, map[string]string{optin.ReloaderAuto: "true", optin.ConfigMapReload: "cfg", optin.SecretReload: "cfg"},
			view{optin.On, true, false}, view{optin.On, true, false}},
		{"own secret list: ConfigMaps read the template", map[string]string{optin.SecretReload: "db"}, map[string]string{optin.ConfigMapReload: "cfg", optin.SecretReload: "cfg"},
			view{optin.Unset, true, false}, view{optin.Unset, false, false}},
		{"own secret auto: the template's auto counts for ConfigMaps only", map[string]string{optin.SecretAuto: "false"}, map[string]string{optin.ReloaderAuto: "true"},
			view{optin.On, false, false}, view{optin.Off, false, false}},
		{"own configmap auto false: Secrets read the template", map[string]string{optin.ConfigMapAuto: "false"}, map[string]string{optin.ReloaderAuto: "true", optin.Search: "true"},
			view{optin.Off, false, false}, view{optin.On, false, true}},
		{"own search counts for both kinds", map[string]string{optin.Search: "true"}, map[string]string{optin.ReloaderAuto: "true", optin.ConfigMapReload: "cfg"},
			view{optin.Unset, false, true}, view{optin.Unset, false, true}},
		{"own reloader auto counts for both kinds", map[string]string{optin.ReloaderAuto: "false"}, map[string]string{optin.ConfigMapReload: "cfg"},
			view{optin.Off, false, false}, view{optin.Off, false, false}},
		{"own watcher auto counts for both kinds", map[string]string{optin.Auto: "true"}, map[string]string{optin.SecretReload: "cfg"},
			view{optin.On, false, false}, view{optin.On, false, false}},
		{"template search, own secret list", map[string]string{optin.SecretReload: "db"}, map[string]string{optin.Search: "true"},
			view{optin.Unset, false, true}, view{optin.Unset, false, false}},
		{"no template", map[string]string{optin.SecretReload: "cfg"}, nil,
			view{optin.Unset, false, false}, view{optin.Unset, true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ann := optin.Effective(tt.own, tt.tmpl)
			for kind, want := range map[refs.Kind]view{refs.ConfigMap: tt.configMap, refs.Secret: tt.secret} {
				got := view{optin.AutoFor(ann, kind), optin.Named(ann, kind, "cfg"),
					optin.Searched(optin.For(ann, kind), map[string]string{optin.Match: "true"})}
				if got != want {
					t.Errorf("%s: %+v, want %+v", kind, got, want)
				}
			}
		})
	}
	own := map[string]string{"a": "b"}
	if got := optin.Effective(own, map[string]string{optin.ConfigMapExclude: "x"}); !cmp.Equal(got, own) {
		t.Errorf("the template's exclude list counts: %v", got)
	}
	optin.Effective(own, map[string]string{optin.ConfigMapReload: "cfg"})
	if len(own) != 1 {
		t.Errorf("Effective changed its argument: %v", own)
	}
}

// TestHasPatterns: a list matches objects beyond the names it holds when an
// entry is not a plain name.
func TestHasPatterns(t *testing.T) {
	for v, want := range map[string]bool{"a,b-c": false, "app-.*": true, "a.b": true, "(bad": false, "a|b": true} {
		if got := optin.HasPatterns(map[string]string{optin.ConfigMapReload: v}, refs.ConfigMap); got != want {
			t.Errorf("HasPatterns(%q) = %v, want %v", v, got, want)
		}
	}
	if optin.HasPatterns(map[string]string{optin.ConfigMapReload: "app-.*"}, refs.Secret) {
		t.Error("a ConfigMap list has no pattern for Secrets")
	}
}

// TestPausePeriodOf: a positive Go duration; anything else is reported and
// means no pause.
func TestPausePeriodOf(t *testing.T) {
	for v, want := range map[string]time.Duration{"5m": 5 * time.Minute, " 30s ": 30 * time.Second, "1h30m": 90 * time.Minute} {
		if got, err := optin.PausePeriodOf(map[string]string{optin.PausePeriod: v}); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", v, got, err, want)
		}
	}
	for _, v := range []string{"5", "soon", "-1m", "0s", ""} {
		if got, err := optin.PausePeriodOf(map[string]string{optin.PausePeriod: v}); err == nil || got != 0 {
			t.Errorf("%q: %v, %v; want an error", v, got, err)
		}
		if optin.Check(map[string]string{optin.PausePeriod: v}) == nil {
			t.Errorf("Check(%q) reports nothing", v)
		}
	}
	if got, err := optin.PausePeriodOf(nil); got != 0 || err != nil {
		t.Errorf("absent: %v, %v", got, err)
	}
}
