package main

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestWriteTable(t *testing.T) {
	g := NewWithT(t)
	r := &report{
		Scenario:       defaultScenario(),
		ControllerCmd:  "bin/watcher --coalesce=0",
		OutDir:         "/tmp/run",
		StartToReady:   1.5,
		StartToSettled: 4.25,
		Settled:        true,
		Idle:           procSample{RSS: 40 << 20},
		End:            procSample{Peak: 60 << 20},
		CPUStartup:     2, CPUIdle: 0.003, CPUChanges: 0.5,
		Controller:            latency{N: 200, P50ms: 12.34, P99ms: 40, MaxMs: 50},
		Floor:                 latency{N: 200, P50ms: 8, P99ms: 20, MaxMs: 25},
		P99Ratio:              2,
		IdleRequestsPerMinute: 4, IdlePhase: 30,
		Requests: requestCounts{
			phaseStartup: {"watchlist secrets": 1, "patch deployments": 1000},
			phaseChanges: {"patch deployments": 200, "create events": 200},
		},
		Correctness: correctness{Expected: 400, Seen: 401, Doubled: 1, DoubledWorkloads: []string{"app-00007"}},
	}
	var b strings.Builder
	g.Expect(r.writeTable(&b)).To(Succeed())
	out := b.String()
	for _, want := range []string{
		"1000 workloads, 1000 Secrets of 16384 B, 1 ref(s) each, 200 changes at 20/s (+200 floor changes)",
		"RSS idle / peak                40.0 MiB / 60.0 MiB",
		"2.00 s / 3 millicores / 0.50 s",
		"2.5 ms per change",
		"controller                              200  12.3 ms  40.0 ms  50.0 ms",
		"p99 / floor p99                         2.00",
		"FAILED",
		"doubled: app-00007",
	} {
		g.Expect(out).To(ContainSubstring(want))
	}
	// Writes first, then the rest, each by name.
	g.Expect(strings.Index(out, "create events")).To(BeNumerically("<", strings.Index(out, "patch deployments")))
	g.Expect(strings.Index(out, "patch deployments")).To(BeNumerically("<", strings.Index(out, "watchlist secrets")))
	g.Expect(out).To(MatchRegexp(`patch deployments +1000 +0 +200 +1\.00`))
	g.Expect(out).To(MatchRegexp(`LIST after start-up +none`))
	g.Expect(out).To(MatchRegexp(`idle, per minute, Leases left out +4\.0 +\(idle phase 30\.0 s\)`))
}

// TestIdleRate: the idle phase's requests per minute, Lease requests left
// out; none without an idle phase followed by another.
func TestIdleRate(t *testing.T) {
	g := NewWithT(t)
	at := func(s int) time.Time { return time.Date(2026, 1, 1, 0, 0, s, 0, time.UTC) }
	counts := requestCounts{
		phaseStartup: {"list secrets": 1},
		phaseIdle:    {"update leases": 6, "get leases": 6, "get /apis/argoproj.io/v1alpha1": 15, "get /apis/bitnami.com/v1alpha1": 15},
	}
	phases := []phase{{phaseStartup, at(0)}, {phaseIdle, at(10)}, {phaseChanges, at(40)}}
	rate, d := idleRate(counts, phases)
	g.Expect(rate).To(BeNumerically("~", 60.0))
	g.Expect(d).To(Equal(30 * time.Second))
	rate, d = idleRate(counts, phases[:2])
	g.Expect(rate).To(BeZero())
	g.Expect(d).To(BeZero())
}
