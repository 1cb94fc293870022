package main

import (
	"math"
	"slices"
	"time"
)

// applied is a change the benchmark made, for one workload whose pod
// template it should change.
type applied struct {
	Workload string
	// Floor is true for a floor change (the benchmark changes the template
	// itself) and false for a change the controller should react to.
	Floor bool
	// Accepted is when the config write returned.
	Accepted time.Time
}

// outcome is how the template changes seen matched the changes made.
type outcome struct {
	// Controller and Floor are the latencies from a config write's
	// acceptance to the template change seen, one per matched change.
	Controller, Floor []time.Duration
	// Expected is the number of template changes the changes call for;
	// Seen the number seen.
	Expected, Seen int
	// Missed counts expected template changes not seen; Doubled counts
	// template changes seen beyond those expected, on any workload.
	Missed, Doubled int
	// MissedWorkloads and DoubledWorkloads name a few of the workloads
	// concerned, sorted.
	MissedWorkloads, DoubledWorkloads []string
}

// maxNamed bounds outcome.MissedWorkloads and DoubledWorkloads.
const maxNamed = 10

// evaluate matches the changes made with the template changes seen in
// [from, to). Changes that restart the same workload are at least minGap
// apart, so per workload the i-th change seen answers the i-th change
// made:
//
//	| made (accepted)  | seen             | result                          |
//	| ---------------- | ---------------- | ------------------------------- |
//	| 10:00:00         | 10:00:00.040     | latency 40ms                    |
//	| 10:00:00, :05    | 10:00:00.040     | latency 40ms, 1 missed          |
//	| 10:00:00         | :00.040, :00.090 | latency 40ms, 1 doubled         |
//	| (none)           | 10:00:03         | 1 doubled (nobody asked for it) |
func evaluate(made []applied, seen map[string][]time.Time, from, to time.Time) outcome {
	var o outcome
	byWorkload := map[string][]applied{}
	for _, a := range made {
		byWorkload[a.Workload] = append(byWorkload[a.Workload], a)
	}
	names := make([]string, 0, len(byWorkload)+len(seen))
	for name := range byWorkload {
		names = append(names, name)
	}
	for name := range seen {
		if _, ok := byWorkload[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		want := byWorkload[name]
		slices.SortFunc(want, func(a, b applied) int { return a.Accepted.Compare(b.Accepted) })
		got := within(seen[name], from, to)
		o.Expected += len(want)
		o.Seen += len(got)
		for i := range min(len(want), len(got)) {
			d := got[i].Sub(want[i].Accepted)
			if want[i].Floor {
				o.Floor = append(o.Floor, d)
			} else {
				o.Controller = append(o.Controller, d)
			}
		}
		if n := len(want) - len(got); n > 0 {
			o.Missed += n
			o.MissedWorkloads = appendNamed(o.MissedWorkloads, name)
		} else if n < 0 {
			o.Doubled -= n
			o.DoubledWorkloads = appendNamed(o.DoubledWorkloads, name)
		}
	}
	return o
}

// countWithin counts the template changes seen in [from, to), on any
// workload.
func countWithin(seen map[string][]time.Time, from, to time.Time) int {
	n := 0
	for _, times := range seen {
		n += len(within(times, from, to))
	}
	return n
}

// within returns the times in [from, to), sorted.
func within(times []time.Time, from, to time.Time) []time.Time {
	var in []time.Time
	for _, t := range times {
		if !t.Before(from) && t.Before(to) {
			in = append(in, t)
		}
	}
	slices.SortFunc(in, time.Time.Compare)
	return in
}

func appendNamed(names []string, name string) []string {
	if len(names) < maxNamed {
		names = append(names, name)
	}
	return names
}

// summary describes a set of latencies.
type summary struct {
	N             int
	P50, P99, Max time.Duration
}

// summarize returns the count, median, 99th percentile and maximum of ds
// (nearest-rank percentiles: the smallest value with at least p% of the
// values at or below it). An empty set gives zeros.
func summarize(ds []time.Duration) summary {
	if len(ds) == 0 {
		return summary{}
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	return summary{
		N:   len(sorted),
		P50: percentile(sorted, 50),
		P99: percentile(sorted, 99),
		Max: sorted[len(sorted)-1],
	}
}

// percentile returns the nearest-rank p-th percentile of sorted, which must
// not be empty.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}
