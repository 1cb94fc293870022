package note

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestJoin: Event notes always fit in the API server's limit, say how
// many parts were left out, and are never cut inside a character.
func TestJoin(t *testing.T) {
	many := make([]string, 200)
	for i := range many {
		many[i] = fmt.Sprintf("ConfigMap config-%03d changed (keys: LOG_LEVEL; 1c0e9b2a→77d3fa10)", i)
	}
	tests := []struct {
		name     string
		parts    []string
		wantTail string
	}{
		{"few parts: all there", many[:3], many[2]},
		{"many parts: a count of the rest", many, "more"},
		{"one huge part: cut and marked", []string{strings.Repeat("é", 2000)}, "…"},
		{"exactly at the limit: nothing left out", []string{strings.Repeat("x", MaxLen-len("p: "))}, "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Join("p: ", tt.parts)
			if len(got) > MaxLen {
				t.Errorf("note of %d bytes, over %d", len(got), MaxLen)
			}
			if !utf8.ValidString(got) {
				t.Error("note cut inside a character")
			}
			if !strings.HasSuffix(got, tt.wantTail) {
				t.Errorf("note ends %q, want it to end with %q", got[max(0, len(got)-80):], tt.wantTail)
			}
		})
	}
	got := Join("p: ", many)
	shown := strings.Count(got, "changed (keys")
	if !strings.HasSuffix(got, fmt.Sprintf("; and %d more", len(many)-shown)) {
		t.Errorf("%d parts shown, but the note says %q", shown, got[len(got)-20:])
	}
}
