package policy

import (
	"fmt"
	"time"
	// The IANA time zone database, built in: a policy's time zone must not
	// depend on the files of the image watcher runs in.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"

	"github.com/watcher-dev/watcher/api/v1alpha1"
)

// Window is a parsed maintenance window: it opens at each time of its cron
// schedule, read on the wall clock of its time zone, and stays open for
// its duration, also counted on that wall clock.
//
// Counting on the wall clock keeps the meaning people give a window on the
// days the clock changes (the cron schedule itself is evaluated with no
// daylight-saving time at all, so it never skips or repeats a start):
//
//	day            window "30 2 * * *" for 1h, Europe/Berlin   open (local time)
//	ordinary       02:30 to 03:30                              02:30 to 03:30
//	spring forward 02:00 jumps to 03:00: 02:30 never happens   03:00 to 03:30 (opens as the clock jumps)
//	fall back      03:00 goes back to 02:00: 02:30 twice       whenever the clock reads 02:30 to 03:30:
//	                                                           02:30 to 03:00 CEST, then 02:30 to 03:30 CET
//	spring forward a window wholly inside the skipped hour     not that day
type Window struct {
	schedule cron.Schedule
	duration time.Duration
	location *time.Location
}

// parser reads the 5 fields of the CRD (minute, hour, day of month, month,
// day of week), names of months and days included, and nothing else: no
// seconds, no CRON_TZ prefix (the time zone is a field of its own).
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// The reasons of the Ready condition of a policy whose windows are invalid.
const (
	ReasonInvalidSchedule = "InvalidSchedule"
	ReasonInvalidTimeZone = "InvalidTimeZone"
)

// WindowError is a maintenance window that cannot be used.
type WindowError struct {
	// Reason is ReasonInvalidSchedule or ReasonInvalidTimeZone.
	Reason string
	Err    error
}

func (e *WindowError) Error() string { return e.Err.Error() }
func (e *WindowError) Unwrap() error { return e.Err }

// ParseWindow parses a maintenance window of a policy. The API server has
// checked the shape of its fields; ParseWindow says whether the schedule
// is a cron expression and the time zone exists.
func ParseWindow(w v1alpha1.MaintenanceWindow) (Window, error) {
	loc := time.UTC
	if w.TimeZone != "" {
		l, err := time.LoadLocation(w.TimeZone)
		if err != nil {
			return Window{}, &WindowError{ReasonInvalidTimeZone, fmt.Errorf("time zone %q: %w", w.TimeZone, err)}
		}
		loc = l
	}
	s, err := parser.Parse(w.Schedule)
	if err != nil {
		return Window{}, &WindowError{ReasonInvalidSchedule, fmt.Errorf("schedule %q: %w", w.Schedule, err)}
	}
	if w.Duration.Duration <= 0 {
		return Window{}, &WindowError{ReasonInvalidSchedule, fmt.Errorf("duration %s is not positive", w.Duration.Duration)}
	}
	return Window{schedule: s, duration: w.Duration.Duration, location: loc}, nil
}

// State tells whether w is open at now and, when it is not, when it opens
// next.
func (w Window) State(now time.Time) (open bool, opens time.Time) {
	nw := wall(now, w.location)
	// The first start after nw-duration: the window it opens is still open
	// at nw if it started by then.
	start := w.schedule.Next(nw.Add(-w.duration))
	if !start.After(nw) {
		return true, time.Time{}
	}
	if start.IsZero() { // a schedule that never fires (30 February)
		return false, time.Time{}
	}
	return false, instant(start, w.location, now)
}

// Windows are the maintenance windows of one or more policies.
type Windows []Window

// State tells whether any window is open at now and, when none is, when
// the first one opens (zero when none ever does). No windows: always open.
func (ws Windows) State(now time.Time) (open bool, opens time.Time) {
	if len(ws) == 0 {
		return true, time.Time{}
	}
	for _, w := range ws {
		o, at := w.State(now)
		if o {
			return true, time.Time{}
		}
		if !at.IsZero() && (opens.IsZero() || at.Before(opens)) {
			opens = at
		}
	}
	return false, opens
}

// wall returns the wall-clock reading of t in loc, as a time in UTC (which
// has no daylight-saving time).
func wall(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
}

// instant returns the first instant after now at which the wall clock of
// loc shows w (a wall-clock reading, see wall) or later: w itself; when the
// clock skips w (spring forward), the instant it jumps; when it shows w
// twice (fall back), the pass that is still to come.
func instant(w time.Time, loc *time.Location, now time.Time) time.Time {
	t := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), loc)
	switch got := wall(t, loc); {
	case got.Before(w): // t is before the jump: the jump is where its zone ends
		_, end := t.ZoneBounds()
		return end
	case got.After(w): // t is after the jump: the jump is where its zone starts
		start, _ := t.ZoneBounds()
		return start
	}
	if t.After(now) {
		return t
	}
	// The first pass is over: the second comes as much later as the clock
	// went back.
	_, end := t.ZoneBounds()
	if end.IsZero() {
		return t
	}
	_, before := t.Zone()
	_, after := end.Zone()
	return t.Add(time.Duration(before-after) * time.Second)
}
