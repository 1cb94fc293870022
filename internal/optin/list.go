package optin

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode/utf8"

	"github.com/watcher-dev/watcher/internal/note"
)

// The limits on what a tenant writes in a list annotation (reload lists and
// exclude lists) and watcher parses. A list over any of them is refused
// whole: it names, matches and excludes nothing, and Check reports it (a
// Warning Event InvalidAnnotation on the workload). Each compiled pattern
// is bounded before it is compiled, so a list costs memory in proportion to
// its text: at most about MaxListProgram*80 bytes plus 1 KiB per pattern
// and the text itself (TestCostCoversHeap).
const (
	// MaxListBytes is the longest list value, in bytes, checked before
	// anything else: 256 entries of 253-byte names with a blank each.
	MaxListBytes = 64 << 10
	// MaxListEntries is the most non-empty entries of one list.
	MaxListEntries = 256
	// MaxEntryBytes is the longest entry, in bytes (blanks around it
	// trimmed): the longest name of a ConfigMap or Secret.
	MaxEntryBytes = 253
	// MaxPatternProgram is the largest compiled program of one pattern
	// entry: its instructions plus the bounds of its character classes
	// (regexp/syntax). `app-.*-config` is 30, `[a-z0-9-]{1,63}` 505;
	// `a{1000}` (8 bytes, 1,004 instructions, about 40 KB compiled) is
	// refused. It is estimated from the parsed expression before
	// compiling, and checked again compiled.
	MaxPatternProgram = 512
	// MaxListProgram is the largest total compiled program of the pattern
	// entries of one list.
	MaxListProgram = 4096
	// MaxCacheBytes bounds the estimated memory of the parsed lists kept
	// (the least recently used go first); a list that does not fit alone is
	// parsed again at each use.
	MaxCacheBytes = 8 << 20
)

// An entry that is a name (no regular-expression metacharacter) is compared
// as a string; one whose only metacharacter is "." is matched rune by rune
// ("." is any character but a newline, as in the regular expression);
// only the others are compiled.
//
//	entry            kind     matches
//	web-config       exact    web-config
//	web.config       dotted   web.config, web-config, webxconfig
//	app-.*, a|b      pattern  what ^(?:entry)$ matches
//	(oops            invalid  nothing; reported, the others apply
//	over a limit     -        the whole list is refused

// parsedList is a parsed reload list.
type parsedList struct {
	// names are the entries that are object names ([a-z0-9.-]).
	names []string
	// exact and dotted are the entries matched without a regexp.
	exact, dotted []string
	// patterns are the other entries, compiled and anchored.
	patterns []pattern
	// invalid are the entries that do not compile.
	invalid []string
	// wild is true when an entry may match more than one name.
	wild bool
	// refused says why the whole list is refused; nil when it is not.
	refused error
	// cost is the estimated memory the list holds, in bytes.
	cost int
}

// pattern is a compiled entry and the literal prefix of all it matches.
type pattern struct {
	prefix string
	re     *regexp.Regexp
}

func (l *parsedList) matches(name string) bool {
	for _, e := range l.exact {
		if e == name {
			return true
		}
	}
	for _, e := range l.dotted {
		if dotMatch(e, name) {
			return true
		}
	}
	for _, p := range l.patterns {
		if strings.HasPrefix(name, p.prefix) && p.re.MatchString(name) {
			return true
		}
	}
	return false
}

// dotMatch tells whether name matches the ASCII entry e, whose "." match
// any rune but a newline, as ^(?:e)$ does.
func dotMatch(e, name string) bool {
	if len(name) < len(e) {
		return false // fewer runes than e
	}
	if len(name) == len(e) && ascii(name) {
		for i := 0; i < len(e); i++ {
			if c := e[i]; (c != '.' || name[i] == '\n') && c != name[i] {
				return false
			}
		}
		return true
	}
	i := 0
	for _, r := range name {
		if i == len(e) {
			return false
		}
		if c := e[i]; (c != '.' || r == '\n') && rune(c) != r {
			return false
		}
		i++
	}
	return i == len(e)
}

// Estimated bytes held by a parsed list (see the comment of MaxCacheBytes):
// measured with runtime.MemStats for Go's regexp (TestCostCoversHeap).
const (
	listOverhead    = 512  // the list, its cache entry and slices
	entryOverhead   = 16   // a string header per entry
	patternOverhead = 1024 // a regexp.Regexp and its pools
	programUnit     = 80   // per instruction or class bound, onepass copy included
)

// errTooLarge marks entries whose program exceeds MaxPatternProgram.
var errTooLarge = errors.New("too large")

// precheck returns why the list v is over MaxListBytes, MaxListEntries or
// MaxEntryBytes, without allocating: it runs before the cache is asked.
func precheck(v string) error {
	if len(v) > MaxListBytes {
		return fmt.Errorf("is %d bytes long, more than the %d allowed", len(v), MaxListBytes)
	}
	n := 0
	for rest := v; rest != ""; {
		var e string
		e, rest, _ = strings.Cut(rest, ",")
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if n++; n > MaxListEntries {
			return fmt.Errorf("has more than %d entries", MaxListEntries)
		}
		if len(e) > MaxEntryBytes {
			return fmt.Errorf("has an entry of %d bytes (%s), more than the %d allowed", len(e), quoteShort(e), MaxEntryBytes)
		}
	}
	return nil
}

// compile parses the list v, which passed precheck.
func compile(v string) *parsedList {
	l := &parsedList{cost: listOverhead + len(v)}
	program := 0
	for e := range strings.SplitSeq(v, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		l.cost += entryOverhead
		switch classify(e) {
		case exact:
			l.exact = append(l.exact, e)
		case dotted:
			l.dotted = append(l.dotted, e)
			l.wild = true
		default:
			p, size, err := compilePattern(e)
			switch {
			case errors.Is(err, errTooLarge):
				return refuse(v, fmt.Errorf("has an entry (%s) that compiles to more than %d instructions", quoteShort(e), MaxPatternProgram))
			case err != nil:
				l.invalid = append(l.invalid, e)
				continue
			}
			if program += size; program > MaxListProgram {
				return refuse(v, fmt.Errorf("has patterns that compile to more than %d instructions together", MaxListProgram))
			}
			l.patterns = append(l.patterns, p)
			l.cost += patternOverhead + programUnit*size
			l.wild = true
		}
		if isName(e) {
			l.names = append(l.names, e)
		}
	}
	return l
}

// refuse returns the list v, refused because of err.
func refuse(v string, err error) *parsedList {
	return &parsedList{refused: err, cost: listOverhead + len(v)}
}

// The kinds of entries (see the table above).
const (
	exact = iota
	dotted
	compiled
)

// classify returns the kind of the entry e: exact or dotted only when e is
// ASCII, so that comparing bytes is comparing runes.
func classify(e string) int {
	kind := exact
	for i := 0; i < len(e); i++ {
		c := e[i]
		switch {
		case c >= utf8.RuneSelf || strings.IndexByte(`\+*?()|[]{}^$`, c) >= 0:
			return compiled
		case c == '.':
			kind = dotted
		}
	}
	return kind
}

// isName tells whether e is made of the characters of object names.
func isName(e string) bool {
	for i := 0; i < len(e); i++ {
		c := e[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '.' && c != '-' {
			return false
		}
	}
	return e != ""
}

// compilePattern compiles the entry e, anchored, and returns its size (see
// MaxPatternProgram). The size is bounded on the parsed expression first,
// so that a repeat is never expanded beyond the limit; errTooLarge when it
// is over.
func compilePattern(e string) (pattern, int, error) {
	re, err := syntax.Parse(e, syntax.Perl)
	var serr *syntax.Error
	if errors.As(err, &serr) && (serr.Code == syntax.ErrLarge || serr.Code == syntax.ErrNestingDepth) {
		return pattern{}, 0, errTooLarge
	}
	if err != nil {
		return pattern{}, 0, err
	}
	if estimate(re) > MaxPatternProgram {
		return pattern{}, 0, errTooLarge
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return pattern{}, 0, err
	}
	size := 0
	for _, in := range prog.Inst {
		size += 1 + len(in.Rune)
	}
	if size > MaxPatternProgram {
		return pattern{}, 0, errTooLarge
	}
	rx, err := regexp.Compile("^(?:" + e + ")$")
	if err != nil {
		return pattern{}, 0, err
	}
	prefix, _ := prog.Prefix()
	return pattern{prefix: prefix, re: rx}, size, nil
}

// estimate bounds the size of the program re compiles to, saturating just
// above MaxPatternProgram.
func estimate(re *syntax.Regexp) int {
	n := 1
	switch re.Op {
	case syntax.OpLiteral:
		n = 2 * len(re.Rune)
	case syntax.OpCharClass:
		n = 1 + len(re.Rune)
	case syntax.OpRepeat:
		times := max(re.Min, re.Max)
		if re.Max < 0 {
			times = re.Min + 1
		}
		n = (times + 1) * (estimate(re.Sub[0]) + 1)
	default:
		for _, sub := range re.Sub {
			n += estimate(sub)
		}
	}
	return min(n, MaxPatternProgram+1)
}

// quoteShort quotes the first 40 bytes of e at most: errors never echo a
// long value.
func quoteShort(e string) string { return note.Quote(e, 40) }

// parse returns the parsed list v: refused without being cached when it is
// over the limits checked first, from the cache or compiled otherwise.
// Compiling happens outside the cache's lock, so that a list being compiled
// never delays another workload's.
func parse(v string) *parsedList {
	if err := precheck(v); err != nil {
		return &parsedList{refused: err}
	}
	if l, ok := lists.get(v); ok {
		return l
	}
	return lists.add(v, compile(v))
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
