// Package note builds the notes of Kubernetes Events: the API server refuses
// an events.k8s.io note longer than MaxLen bytes, so every note watcher
// sends is cut to fit, on a rune boundary, saying what was left out.
package note

import (
	"fmt"
	"unicode/utf8"
)

// MaxLen is the longest note the API server accepts on an events.k8s.io
// Event.
const MaxLen = 1024

// Join joins parts after prefix, leaving out the parts that do not fit in
// an Event note, and saying how many were left out.
func Join(prefix string, parts []string) string {
	out := prefix
	for i, p := range parts {
		if i > 0 {
			p = "; " + p
		}
		room := MaxLen
		if i < len(parts)-1 {
			room -= len(fmt.Sprintf("; and %d more", len(parts)-i))
		}
		if len(out)+len(p) > room {
			if i == 0 {
				return Truncate(out + p)
			}
			return out + fmt.Sprintf("; and %d more", len(parts)-i)
		}
		out += p
	}
	return out
}

// Truncate cuts s to MaxLen bytes, on a rune boundary, marking the cut.
func Truncate(s string) string {
	if len(s) <= MaxLen {
		return s
	}
	const mark = "…"
	return Cut(s, MaxLen-len(mark)) + mark
}

// Cut returns s cut to at most n bytes, on a rune boundary.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Quote quotes the first n bytes of s at most, cut on a rune boundary and
// marked, so that a message never echoes a long or unprintable value.
func Quote(s string, n int) string {
	if len(s) <= n {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q…", Cut(s, n))
}
