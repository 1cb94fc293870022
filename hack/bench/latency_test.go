package main

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestEvaluate(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	from, to := at(0), at(60_000)
	tests := []struct {
		name string
		made []applied
		seen map[string][]time.Time
		want outcome
	}{{
		name: "each change seen once",
		made: []applied{{"a", false, at(100)}, {"f", true, at(150)}, {"a", false, at(5000)}},
		seen: map[string][]time.Time{"a": {at(5030), at(140)}, "f": {at(160)}},
		want: outcome{Controller: []time.Duration{40 * time.Millisecond, 30 * time.Millisecond},
			Floor: []time.Duration{10 * time.Millisecond}, Expected: 3, Seen: 3},
	}, {
		name: "second change missed",
		made: []applied{{"a", false, at(100)}, {"a", false, at(5000)}},
		seen: map[string][]time.Time{"a": {at(140)}},
		want: outcome{Controller: []time.Duration{40 * time.Millisecond}, Expected: 2, Seen: 1,
			Missed: 1, MissedWorkloads: []string{"a"}},
	}, {
		name: "restarted twice, and a workload nobody changed restarted",
		made: []applied{{"a", false, at(100)}},
		seen: map[string][]time.Time{"a": {at(140), at(190)}, "b": {at(3000)}},
		want: outcome{Controller: []time.Duration{40 * time.Millisecond}, Expected: 1, Seen: 3,
			Doubled: 2, DoubledWorkloads: []string{"a", "b"}},
	}, {
		name: "changes outside the window do not count",
		made: []applied{{"a", false, at(100)}},
		seen: map[string][]time.Time{"a": {at(-5000), at(140), at(70_000)}},
		want: outcome{Controller: []time.Duration{40 * time.Millisecond}, Expected: 1, Seen: 1},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(evaluate(tt.made, tt.seen, from, to)).To(Equal(tt.want))
		})
	}
}

func TestCountWithin(t *testing.T) {
	t0 := time.Now()
	seen := map[string][]time.Time{"a": {t0, t0.Add(time.Second)}, "b": {t0.Add(2 * time.Second)}}
	NewWithT(t).Expect(countWithin(seen, t0, t0.Add(2*time.Second))).To(Equal(2))
}

func TestSummarize(t *testing.T) {
	g := NewWithT(t)
	g.Expect(summarize(nil)).To(Equal(summary{}))

	var ds []time.Duration
	for i := 200; i >= 1; i-- { // unsorted on purpose
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	g.Expect(summarize(ds)).To(Equal(summary{N: 200, P50: 100 * time.Millisecond, P99: 198 * time.Millisecond, Max: 200 * time.Millisecond}))
	g.Expect(ds[0]).To(Equal(200*time.Millisecond), "the input is left alone")

	g.Expect(summarize([]time.Duration{7})).To(Equal(summary{N: 1, P50: 7, P99: 7, Max: 7}))
	// Nearest rank: the 99th percentile of 10 values is the 10th.
	ten := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	g.Expect(percentile(ten, 99)).To(Equal(time.Duration(10)))
	g.Expect(percentile(ten, 50)).To(Equal(time.Duration(5)))
}
