package optin_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/refs"
)

// entries returns n entries made by format from 0..n-1, joined by commas.
func entries(n int, format string) string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(format, i)
	}
	return strings.Join(out, ",")
}

// TestListLimits: a list over any limit is refused whole (it names and
// matches nothing, and Check says why); at the limit it is read.
func TestListLimits(t *testing.T) {
	tests := []struct {
		name    string
		list    string
		refused string // substring of Check's error; "": read
	}{
		{"entries at the limit", entries(optin.MaxListEntries, "c%d"), ""},
		{"one entry more", entries(optin.MaxListEntries+1, "c%d"), "more than 256 entries"},
		{"empty entries do not count", entries(optin.MaxListEntries, "c%d") + strings.Repeat(", ", 1000), ""},
		{"entry at the length limit", "c0," + strings.Repeat("c", optin.MaxEntryBytes), ""},
		{"entry too long", "c0," + strings.Repeat("c", optin.MaxEntryBytes+1), "an entry of 254 bytes"},
		{"value too long", "c0" + strings.Repeat(" ", optin.MaxListBytes), "more than the 65536 allowed"},
		{"a{1000}: a small text, a large program", "c0,a{1000}", "compiles to more than 512 instructions"},
		{"nested repeats", "c0,(a{30}){30}", "compiles to more than 512 instructions"},
		{"a wide class", `c0,\pL+`, "compiles to more than 512 instructions"},
		{"a pattern under the limit", "c0,a{100}", ""},
		{"patterns over the list's budget", "c0," + entries(20, "a{%d}b{100}"), "more than 4096 instructions together"},
		{"many small patterns", "c0," + entries(200, "p%d-.*"), ""},
		{"names with dots cost no program", entries(optin.MaxListEntries-1, "c0."+strings.Repeat("x", 200)+".%d") + ",c0", ""},
		{"12,000 entries a{1000} (96 KB)", "c0," + strings.Repeat("a{1000},", 12000), "more than the 65536 allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ann := map[string]string{optin.ConfigMapReload: tt.list}
			err := optin.Check(ann)
			if tt.refused == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				if !optin.Named(ann, refs.ConfigMap, "c0") {
					t.Error("the list does not name c0")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.refused) || !strings.Contains(err.Error(), "ignoring the whole list") {
				t.Fatalf("Check = %v, want %q", err, tt.refused)
			}
			if len(err.Error()) > 200 {
				t.Errorf("the error echoes the list: %d bytes", len(err.Error()))
			}
			if optin.Named(ann, refs.ConfigMap, "c0") || optin.Names(ann, refs.ConfigMap) != nil ||
				optin.HasPatterns(ann, refs.ConfigMap) || optin.Matcher(ann, refs.ConfigMap) != nil {
				t.Error("a refused list still names or matches")
			}
		})
	}
}

// TestExcludeLimits: an exclude list over the limits excludes nothing.
func TestExcludeLimits(t *testing.T) {
	for list, want := range map[string]bool{
		entries(optin.MaxListEntries, "c%d"):               true,
		entries(optin.MaxListEntries+1, "c%d"):             false,
		"c0," + strings.Repeat("x", optin.MaxEntryBytes+1): false,
	} {
		ann := map[string]string{optin.ConfigMapExclude: list}
		if got := optin.Excluded(ann, refs.ConfigMap, "c0"); got != want {
			t.Errorf("%.20s...: Excluded = %v, want %v", list, got, want)
		}
		if (optin.Check(ann) == nil) != want {
			t.Errorf("%.20s...: Check = %v", list, optin.Check(ann))
		}
	}
}

// TestEntryKinds: names are compared, names with dots matched rune by rune,
// only the others compiled; all as the anchored regular expression would.
func TestEntryKinds(t *testing.T) {
	tests := []struct {
		entry   string
		wild    bool // HasPatterns
		name    bool // in Names
		match   []string
		noMatch []string
	}{
		{"web-config", false, true, []string{"web-config"}, []string{"web-confi", "web-config-2", "Web-config"}},
		{"Web_Config", false, false, []string{"Web_Config"}, []string{"web_config"}},
		{"web.config", true, true, []string{"web.config", "web-config", "webéconfig"}, []string{"web\nconfig", "webconfig", "web..config"}},
		{"...", true, true, []string{"abc", "ééé"}, []string{"ab", "abcd"}},
		{"web-.*", true, false, []string{"web-", "web-a.b"}, []string{"web", "xweb-a"}},
		{"é-config", true, false, []string{"é-config"}, []string{"e-config"}},
		{"(?i)web", true, false, []string{"WEB", "web"}, []string{"webs"}},
	}
	for _, tt := range tests {
		ann := map[string]string{optin.SecretReload: tt.entry}
		if got := optin.HasPatterns(ann, refs.Secret); got != tt.wild {
			t.Errorf("%q: HasPatterns = %v, want %v", tt.entry, got, tt.wild)
		}
		if got := len(optin.Names(ann, refs.Secret)) == 1; got != tt.name {
			t.Errorf("%q: in Names = %v, want %v", tt.entry, got, tt.name)
		}
		matcher := optin.Matcher(ann, refs.Secret)
		for _, n := range tt.match {
			if !optin.Named(ann, refs.Secret, n) || (matcher != nil && !matcher(n)) {
				t.Errorf("%q does not name %q", tt.entry, n)
			}
		}
		for _, n := range tt.noMatch {
			if optin.Named(ann, refs.Secret, n) || (matcher != nil && matcher(n)) {
				t.Errorf("%q names %q", tt.entry, n)
			}
		}
	}
}

// TestConcurrentLists: lists are parsed and read from many goroutines at
// once (run with -race).
func TestConcurrentLists(t *testing.T) {
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				ann := map[string]string{optin.ConfigMapReload: fmt.Sprintf("app-%d-.*,c%d", i%7, i)}
				if !optin.Named(ann, refs.ConfigMap, fmt.Sprintf("app-%d-x", i%7)) || !optin.Named(ann, refs.ConfigMap, fmt.Sprintf("c%d", i)) {
					t.Errorf("list %d: a name is not matched", i)
					return
				}
			}
		}()
	}
	wg.Wait()
}
