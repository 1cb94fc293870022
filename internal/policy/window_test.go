package policy

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watcher-dev/watcher/api/v1alpha1"
)

func mustWindow(t *testing.T, schedule string, d time.Duration, tz string) Window {
	t.Helper()
	w, err := ParseWindow(v1alpha1.MaintenanceWindow{Schedule: schedule, Duration: metav1.Duration{Duration: d}, TimeZone: tz})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestWindowState: the window arithmetic, daylight-saving changes of
// Europe/Berlin both ways included (2026: spring forward on 29 March at
// 02:00 CET, fall back on 25 October at 03:00 CEST), with times given in
// UTC so that each instant is unambiguous.
func TestWindowState(t *testing.T) {
	daily := mustWindow(t, "30 2 * * *", time.Hour, "Europe/Berlin")
	gap := mustWindow(t, "10 2 * * *", 30*time.Minute, "Europe/Berlin")
	utc := mustWindow(t, "0 9 * * MON-FRI", 2*time.Hour, "")
	minute := mustWindow(t, "* * * * *", 10*time.Second, "UTC")
	z := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	cases := []struct {
		name  string
		w     Window
		now   string
		open  bool
		opens string // when closed: the next opening, in UTC
	}{
		// An ordinary day (CET, UTC+1): open 02:30 to 03:30 local.
		{"ordinary, just before", daily, "2026-01-15T01:29:59Z", false, "2026-01-15T01:30:00Z"},
		{"ordinary, at the start", daily, "2026-01-15T01:30:00Z", true, ""},
		{"ordinary, last second", daily, "2026-01-15T02:29:59Z", true, ""},
		{"ordinary, at the end", daily, "2026-01-15T02:30:00Z", false, "2026-01-16T01:30:00Z"},
		// Summer (CEST, UTC+2).
		{"summer, inside", daily, "2026-07-01T00:45:00Z", true, ""},
		// Spring forward: 02:00 CET (01:00Z) jumps to 03:00 CEST. 02:30
		// never shows; the window opens as the clock jumps, until 03:30
		// CEST (01:30Z).
		{"spring forward, before the jump", daily, "2026-03-29T00:59:59Z", false, "2026-03-29T01:00:00Z"},
		{"spring forward, at the jump", daily, "2026-03-29T01:00:00Z", true, ""},
		{"spring forward, 03:29 CEST", daily, "2026-03-29T01:29:59Z", true, ""},
		{"spring forward, 03:30 CEST", daily, "2026-03-29T01:30:00Z", false, "2026-03-30T00:30:00Z"},
		{"spring forward, wholly skipped window", gap, "2026-03-29T00:59:59Z", false, "2026-03-29T01:00:00Z"},
		{"spring forward, wholly skipped window after the jump", gap, "2026-03-29T01:00:00Z", false, "2026-03-30T00:10:00Z"},
		// Fall back: 03:00 CEST (01:00Z) goes back to 02:00 CET. Open
		// while the clock reads 02:30 to 03:30: 00:30Z to 01:00Z, then
		// 01:30Z to 02:30Z.
		{"fall back, first pass", daily, "2026-10-25T00:45:00Z", true, ""},
		{"fall back, between the passes", daily, "2026-10-25T01:10:00Z", false, "2026-10-25T01:30:00Z"},
		{"fall back, second pass", daily, "2026-10-25T01:30:00Z", true, ""},
		{"fall back, 03:29 CET", daily, "2026-10-25T02:29:59Z", true, ""},
		{"fall back, 03:30 CET", daily, "2026-10-25T02:30:00Z", false, "2026-10-26T01:30:00Z"},
		// UTC, days of the week.
		{"weekday window, Friday evening", utc, "2026-01-16T18:00:00Z", false, "2026-01-19T09:00:00Z"},
		{"weekday window, Monday 10:59", utc, "2026-01-19T10:59:00Z", true, ""},
		// Every minute, 10s each.
		{"per-minute window, open", minute, "2026-01-15T10:00:09Z", true, ""},
		{"per-minute window, closed", minute, "2026-01-15T10:00:10Z", false, "2026-01-15T10:01:00Z"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			open, opens := c.w.State(z(c.now))
			if open != c.open {
				t.Fatalf("open = %v, want %v", open, c.open)
			}
			if c.opens != "" && !opens.Equal(z(c.opens)) {
				t.Fatalf("opens = %s, want %s", opens.UTC().Format(time.RFC3339), c.opens)
			}
			if !open && !opens.After(z(c.now)) {
				t.Fatalf("opens %s is not after now", opens.UTC().Format(time.RFC3339))
			}
		})
	}
}

// TestWindowsState: several windows are open when one is, and open next
// when the first does; no windows is always open.
func TestWindowsState(t *testing.T) {
	nine := mustWindow(t, "0 9 * * *", time.Hour, "UTC")
	noon := mustWindow(t, "0 12 * * *", time.Hour, "UTC")
	at := func(h, m int) time.Time { return time.Date(2026, 1, 15, h, m, 0, 0, time.UTC) }
	cases := []struct {
		name  string
		ws    Windows
		now   time.Time
		open  bool
		opens time.Time
	}{
		{"none: always open", nil, at(3, 0), true, time.Time{}},
		{"first open", Windows{nine, noon}, at(9, 30), true, time.Time{}},
		{"second open", Windows{nine, noon}, at(12, 30), true, time.Time{}},
		{"between: the next to open", Windows{nine, noon}, at(10, 30), false, at(12, 0)},
		{"before both", Windows{noon, nine}, at(8, 0), false, at(9, 0)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			open, opens := c.ws.State(c.now)
			if open != c.open || !opens.Equal(c.opens) {
				t.Fatalf("State = %v, %s; want %v, %s", open, opens, c.open, c.opens)
			}
		})
	}
}

// TestParseWindow: what the API server cannot check is reported with the
// reason of the Ready condition.
func TestParseWindow(t *testing.T) {
	cases := []struct {
		name   string
		w      v1alpha1.MaintenanceWindow
		reason string // "" when valid
	}{
		{"valid", v1alpha1.MaintenanceWindow{Schedule: "0 2 * * *", Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "Europe/Berlin"}, ""},
		{"names of days and months", v1alpha1.MaintenanceWindow{Schedule: "*/15 1-5 1,15 JAN-MAR MON-FRI", Duration: metav1.Duration{Duration: time.Minute}}, ""},
		{"minute out of range", v1alpha1.MaintenanceWindow{Schedule: "61 2 * * *", Duration: metav1.Duration{Duration: time.Hour}}, ReasonInvalidSchedule},
		{"unknown day name", v1alpha1.MaintenanceWindow{Schedule: "0 2 * * FUNDAY", Duration: metav1.Duration{Duration: time.Hour}}, ReasonInvalidSchedule},
		{"six fields", v1alpha1.MaintenanceWindow{Schedule: "0 0 2 * * *", Duration: metav1.Duration{Duration: time.Hour}}, ReasonInvalidSchedule},
		{"unknown time zone", v1alpha1.MaintenanceWindow{Schedule: "0 2 * * *", Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "Mars/Olympus_Mons"}, ReasonInvalidTimeZone},
		{"zero duration", v1alpha1.MaintenanceWindow{Schedule: "0 2 * * *"}, ReasonInvalidSchedule},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseWindow(c.w)
			var we *WindowError
			switch {
			case c.reason == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.reason != "" && !errors.As(err, &we):
				t.Fatalf("error %v, want reason %s", err, c.reason)
			case c.reason != "" && we.Reason != c.reason:
				t.Fatalf("reason %s, want %s (%v)", we.Reason, c.reason, err)
			}
		})
	}
}
