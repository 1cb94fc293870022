package optin_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/refs"
)

// FuzzReloadList: any reload list, written by anyone who can edit a
// workload, is either refused whole (naming nothing) or names exactly what
// Reloader's anchored regular expressions name (names compared, names with
// dots matched, without a regexp, alike); Names are entries that name
// themselves; Check's error stays short.
func FuzzReloadList(f *testing.F) {
	for _, s := range [][2]string{
		{"web-config", "web-config"}, {"web.config", "web-config"}, {"app-.*,db", "app-x"}, {"a|b", "ab"},
		{"(oops,ok", "ok"}, {"...", "é\néé"}, {"(?i)WEB", "web"}, {"a{1000}", "a"}, {"é.x", "éyx"}, {" a , ,b", "b"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, list, name string) {
		if !utf8.ValidString(name) {
			return // object names are UTF-8 (ASCII, indeed)
		}
		ann := map[string]string{optin.ConfigMapReload: list}
		err := optin.Check(ann)
		if err != nil && len(err.Error()) > 4096 {
			t.Fatalf("Check's error is %d bytes long", len(err.Error()))
		}
		got := optin.Named(ann, refs.ConfigMap, name)
		if err != nil && strings.Contains(err.Error(), "ignoring the whole list") {
			if got || optin.Names(ann, refs.ConfigMap) != nil || optin.HasPatterns(ann, refs.ConfigMap) {
				t.Fatalf("refused list %q names %q", list, name)
			}
			return
		}
		want := false
		var entries []string
		for e := range strings.SplitSeq(list, ",") {
			if e = strings.TrimSpace(e); e == "" {
				continue
			}
			entries = append(entries, e)
			if _, err := regexp.Compile(e); err != nil {
				continue // not a regular expression on its own: ")(x" must not close the anchors' group
			}
			if re, err := regexp.Compile("^(?:" + e + ")$"); err == nil && re.MatchString(name) {
				want = true
			}
		}
		if got != want {
			t.Fatalf("Named(%q, %q) = %v, the regular expressions say %v", list, name, got, want)
		}
		if m := optin.Matcher(ann, refs.ConfigMap); m != nil && m(name) != want {
			t.Fatalf("Matcher(%q)(%q) = %v, want %v", list, name, m(name), want)
		}
		for _, n := range optin.Names(ann, refs.ConfigMap) {
			if !slices.Contains(entries, n) || !optin.Named(ann, refs.ConfigMap, n) {
				t.Fatalf("Names(%q) has %q, which it does not name", list, n)
			}
		}
	})
}
