package policy

import (
	"testing"
	"time"
)

// TestNext: one row per line of next's table.
func TestNext(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	const confirm = 15 * time.Second
	seen := absence{since: t0, answers: 1}
	tests := []struct {
		name      string
		a         answer
		abs       absence
		want      action
		wantAfter absence
	}{
		{"unknown keeps the absence", answer{known: false, on: true, now: t0.Add(time.Hour)}, seen, actKeep, seen},
		{"served, stopped: start", answer{served: true, known: true, now: t0}, absence{}, actStart, absence{}},
		{"served, running: absence forgotten", answer{served: true, known: true, on: true, now: t0.Add(time.Minute)}, seen, actKeep, absence{}},
		{"not served, stopped: off already", answer{known: true, now: t0}, absence{}, actKeep, absence{}},
		{"not served, running, first answer: wait", answer{known: true, on: true, now: t0}, absence{}, actWait, seen},
		{"not served, running, within confirm: wait", answer{known: true, on: true, now: t0.Add(confirm - time.Second)}, seen, actWait, absence{since: t0, answers: 2}},
		{"not served, running, confirm over but only one answer before: wait", answer{known: true, on: true, now: t0.Add(time.Hour)}, absence{}, actWait, absence{since: t0.Add(time.Hour), answers: 1}},
		{"not served, running, confirmed: stop", answer{known: true, on: true, now: t0.Add(confirm)}, seen, actStop, absence{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, after := next(tt.a, tt.abs, confirm)
			if got != tt.want || after != tt.wantAfter {
				t.Errorf("next = %v, %+v; want %v, %+v", got, after, tt.want, tt.wantAfter)
			}
		})
	}
}
