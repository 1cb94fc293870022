package alert

import (
	"fmt"
	"testing"
	"time"
)

// TestLimiter: the rows of limiter's table, as sequences of alerts at
// times (seconds from a start) and whether each is allowed.
func TestLimiter(t *testing.T) {
	held := func(ns string) Alert {
		return Alert{Event: Held, Workload: &Object{Kind: "Deployment", Namespace: ns, Name: "w"}}
	}
	flap := func(ns string) Alert {
		return Alert{Event: Flapping, Sources: []Source{{Object: Object{Kind: "ConfigMap", Namespace: ns, Name: "c"}}}}
	}
	failed := func(ns string) Alert {
		return Alert{Event: FailedRollout, Workload: &Object{Kind: "Deployment", Namespace: ns, Name: "w"}}
	}
	type step struct {
		at    float64
		a     Alert
		allow bool
	}
	burst := func(a Alert, n int, at float64, allow bool) []step {
		var s []step
		for range n {
			s = append(s, step{at, a, allow})
		}
		return s
	}
	cat := func(parts ...[]step) []step {
		var s []step
		for _, p := range parts {
			s = append(s, p...)
		}
		return s
	}
	for _, tt := range []struct {
		name  string
		limit Limit
		steps []step
	}{
		{"a new namespace has Burst", Limit{Burst: 3, Every: time.Minute},
			cat(burst(held("a"), 3, 0, true), burst(held("a"), 2, 0, false))},
		{"one more every Every", Limit{Burst: 2, Every: 10 * time.Second},
			cat(burst(held("a"), 2, 0, true), []step{{5, held("a"), false}, {10, held("a"), true}, {11, held("a"), false}, {40, held("a"), true}, {40, held("a"), true}, {40, held("a"), false}})},
		{"namespaces apart", Limit{Burst: 1, Every: time.Minute},
			[]step{{0, held("a"), true}, {0, held("a"), false}, {0, held("b"), true}, {0, flap("b"), false}, {0, flap("c"), true}}},
		{"a flood does not take the tokens of failed rollouts", Limit{Burst: 2, Every: time.Minute},
			cat(burst(flap("a"), 2, 0, true), burst(held("a"), 50, 1, false), burst(failed("a"), 2, 2, true), []step{{2, failed("a"), false}})},
		{"bounded: a new namespace waits until a bucket is full again", Limit{Burst: 1, Every: time.Minute, MaxNamespaces: 2},
			[]step{{0, held("a"), true}, {30, held("b"), true}, {31, held("c"), false}, {60, held("c"), true}, {61, held("d"), false}, {90, held("d"), true}}},
		{"bounded per class", Limit{Burst: 1, Every: time.Minute, MaxNamespaces: 1},
			[]step{{0, held("a"), true}, {0, held("b"), false}, {0, failed("b"), true}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := newLimiter(tt.limit)
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for i, s := range tt.steps {
				at := start.Add(time.Duration(s.at * float64(time.Second)))
				if got, _ := l.allow(s.a, at); got != s.allow {
					t.Fatalf("step %d (%s %s at %vs): allowed %v, want %v", i, s.a.Event, namespaceOf(s.a), s.at, got, s.allow)
				}
			}
			for c, m := range l.buckets {
				if max := l.limit.MaxNamespaces; len(m) > max {
					t.Errorf("class %d keeps %d buckets, more than %d", c, len(m), max)
				}
			}
		})
	}
}

// TestLimiterLogsOncePerRun: newlyDry is set on the first refusal of a run
// only.
func TestLimiterLogsOncePerRun(t *testing.T) {
	l := newLimiter(Limit{Burst: 1, Every: time.Minute})
	now := time.Now()
	a := Alert{Event: Held, Workload: &Object{Namespace: "a"}}
	var got []string
	for i, at := range []time.Duration{0, 0, 0, time.Minute, time.Minute, time.Minute} {
		ok, dry := l.allow(a, now.Add(at))
		got = append(got, fmt.Sprintf("%d:%v/%v", i, ok, dry))
	}
	want := "[0:true/false 1:false/true 2:false/false 3:true/false 4:false/true 5:false/false]"
	if fmt.Sprint(got) != want {
		t.Errorf("got %v, want %s", got, want)
	}
}
