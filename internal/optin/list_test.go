package optin

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/watcher-dev/watcher/internal/refs"
)

// TestClassify: only entries with a metacharacter other than "." (or not
// ASCII) are compiled.
func TestClassify(t *testing.T) {
	for e, want := range map[string]int{
		"web-config": exact, "Web_Config": exact, "a/b": exact,
		"web.config": dotted, ".": dotted,
		"web-.*": compiled, "a|b": compiled, "(x)": compiled, `a\d`: compiled, "x{2}": compiled, "^a$": compiled,
		"a+": compiled, "a?": compiled, "[a]": compiled, "é": compiled,
	} {
		if got := classify(e); got != want {
			t.Errorf("classify(%q) = %d, want %d", e, got, want)
		}
	}
}

// TestCompilePattern: the program is bounded before and after compiling.
func TestCompilePattern(t *testing.T) {
	tests := []struct {
		entry string
		large bool
	}{
		{"app-.*-config", false},
		{"a{100}", false},
		{"[a-z0-9-]{1,63}", false},
		{"a{1000}", true},
		{"(a{30}){30}", true},
		{`\pL`, true},
		{"(?i)" + strings.Repeat("k", 100), false},
		{"(?i)" + strings.Repeat("k", 300), true},
		{"((a{9}){9}){9}", true},
	}
	for _, tt := range tests {
		_, size, err := compilePattern(tt.entry)
		if large := err == errTooLarge; large != tt.large {
			t.Errorf("%q: too large = %v (size %d, %v), want %v", tt.entry, large, size, err, tt.large)
		}
		if err == nil && (size <= 0 || size > MaxPatternProgram) {
			t.Errorf("%q: size %d", tt.entry, size)
		}
	}
	if _, _, err := compilePattern("(oops"); err == nil || err == errTooLarge {
		t.Errorf("(oops: %v, want a syntax error", err)
	}
	if p, _, _ := compilePattern("app-.*-config"); p.prefix != "app-" {
		t.Errorf("prefix %q, want app-", p.prefix)
	}
}

// retained returns the heap retained by what build returns, measured with
// runtime.MemStats, and build's duration.
func retained(build func() any) (int64, time.Duration) {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	start := time.Now()
	kept := build()
	took := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	runtime.KeepAlive(kept)
	return int64(m1.HeapAlloc) - int64(m0.HeapAlloc), took
}

// withCache runs f with an empty cache of max bytes.
func withCache(t *testing.T, maxBytes int, f func()) {
	saved := lists
	lists = newCache(maxBytes)
	defer func() { lists = saved }()
	f()
}

// TestHugeAnnotation: the reload list of the issue (12,000 entries
// a{1000}, 96 KB) is refused before anything is compiled or cached; the
// largest list the limits accept costs what the cache counts for it.
func TestHugeAnnotation(t *testing.T) {
	huge := strings.TrimSuffix(strings.Repeat("a{1000},", 12000), ",")
	// The largest list accepted: 15 patterns of 258 instructions, and names
	// with dots up to MaxListEntries and MaxListBytes.
	worst := strings.Repeat("a{127},", 15) + strings.Join(strings.Split(strings.Repeat("n."+strings.Repeat("x", 242)+",", MaxListEntries-15), ",")[:MaxListEntries-15], ",")
	withCache(t, MaxCacheBytes, func() {
		for _, v := range []string{huge, worst} {
			ann := map[string]string{ConfigMapReload: v}
			var err error
			heap, took := retained(func() any {
				Named(ann, refs.ConfigMap, "web")
				err = Check(ann)
				return nil
			})
			n, bytes := lists.size()
			t.Logf("list of %d bytes, %d entries: %v; parsed in %s, %d bytes retained; cache: %d lists, %d bytes counted",
				len(v), strings.Count(v, ",")+1, err, took, heap, n, bytes)
			if heap > 1<<20 {
				t.Errorf("%d bytes retained", heap)
			}
			if (err == nil) != (v == worst) {
				t.Errorf("refused: %v", err)
			}
		}
	})
}

// TestCostCoversHeap: the cost the cache counts for a list is at least
// the heap it retains, for lists of every kind of entry.
func TestCostCoversHeap(t *testing.T) {
	const copies = 50
	for _, format := range []string{
		"c%d-" + strings.Repeat("x", 40),
		"c%d." + strings.Repeat("x", 40),
		"p%d-.*",
		"b{%d}x{60}",
		"[a-z]+-%d-[0-9]{1,5}",
	} {
		withCache(t, 1<<30, func() {
			values := make([]string, copies)
			for i := range values {
				values[i] = fmt.Sprintf("v%d,", i) + strings.Join(strings.Split(strings.Repeat(format+",", 16), ","), ",")
				values[i] = strings.NewReplacer("%d", fmt.Sprint(i)).Replace(values[i])
			}
			heap, _ := retained(func() any {
				for _, v := range values {
					if l := parse(v); l.refused != nil {
						t.Fatalf("%s: %v", format, l.refused)
					}
				}
				return nil
			})
			_, counted := lists.size()
			t.Logf("%-28s retained %6d bytes a list, counted %6d", format, heap/copies, counted/copies)
			if heap > int64(counted) {
				t.Errorf("%s: %d bytes retained, %d counted", format, heap, counted)
			}
		})
	}
}

// TestCacheBounded: however many distinct lists there are, the cache
// holds at most MaxCacheBytes of them, and the heap it retains stays
// within that.
func TestCacheBounded(t *testing.T) {
	withCache(t, MaxCacheBytes, func() {
		heap, took := retained(func() any {
			for i := 0; i < 200; i++ {
				parse(fmt.Sprintf("n%d,", i) + strings.TrimSuffix(strings.Repeat(fmt.Sprintf("a{%d}b{100},", i%20), 16), ","))
			}
			return nil
		})
		n, counted := lists.size()
		t.Logf("200 lists at the program limit in %s: %d cached, %d bytes counted, %d retained", took, n, counted, heap)
		if counted > MaxCacheBytes || heap > MaxCacheBytes {
			t.Errorf("%d bytes counted, %d retained; the bound is %d", counted, heap, MaxCacheBytes)
		}
		if n == 0 || n == 200 {
			t.Errorf("%d lists cached", n)
		}
	})
}

// TestCacheLRU: the least recently used list goes first; a list larger
// than the cache is not kept.
func TestCacheLRU(t *testing.T) {
	c := newCache(3000)
	a, b, d := &parsedList{cost: 1000}, &parsedList{cost: 1000}, &parsedList{cost: 1000}
	c.add("a", a)
	c.add("b", b)
	c.add("c", &parsedList{cost: 1000})
	c.get("a")
	c.add("d", d)
	if _, ok := c.get("b"); ok {
		t.Error("b, the least recently used, is still cached")
	}
	for _, k := range []string{"a", "c", "d"} {
		if _, ok := c.get(k); !ok {
			t.Errorf("%s is not cached", k)
		}
	}
	if got := c.add("a", &parsedList{}); got != a {
		t.Error("a second add replaced the cached list")
	}
	c.add("big", &parsedList{cost: 4000})
	if n, bytes := c.size(); n != 3 || bytes != 3000 {
		t.Errorf("%d lists, %d bytes", n, bytes)
	}
}
