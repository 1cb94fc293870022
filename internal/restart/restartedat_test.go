package restart

import (
	"testing"
	"time"
)

// TestRestartedAtValue: kubectl's annotation holds an RFC 3339 time within
// the second of the restart; two restarts in the same second, or after
// the clock went back to it, write two values; the same restart always
// writes the same one.
func TestRestartedAtValue(t *testing.T) {
	at := time.Date(2026, 11, 26, 11, 4, 5, 999, time.FixedZone("CET", 3600))
	for _, tt := range []struct {
		name   string
		a, b   string
		at2    time.Time
		differ bool
	}{
		{"two restarts in one second", "id1", "id2", at.Add(300 * time.Millisecond), true},
		{"the clock back to the same second", "id2", "id3", at.Add(-time.Nanosecond * 999), true},
		{"the same restart", "id1", "id1", at.Add(500 * time.Millisecond), false},
		{"no restart ID: the clock's own nanoseconds", "", "", at.Add(time.Millisecond), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, b := restartedAt(at, tt.a), restartedAt(tt.at2, tt.b)
			if (a != b) != tt.differ {
				t.Errorf("%q and %q: differ %v, want %v", a, b, a != b, tt.differ)
			}
			for _, v := range []string{a, b} {
				got, err := time.Parse(time.RFC3339, v)
				if err != nil {
					t.Fatalf("%q is not RFC 3339: %v", v, err)
				}
				if got.Truncate(time.Second) != at.UTC().Truncate(time.Second) || got.Location() != time.UTC {
					t.Errorf("%q is not within the second of the restart, in UTC", v)
				}
			}
		})
	}
}
