package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Phases of a run, as the request counts name them.
const (
	phaseStartup = "startup" // controller start to settled
	phaseIdle    = "idle"    // settled to the first change
	phaseChanges = "changes" // first change to the end of the run
)

// report is the result of a run: printed as a table, written as JSON.
type report struct {
	Scenario      Scenario `json:"scenario"`
	ControllerCmd string   `json:"controllerCmd"`
	OutDir        string   `json:"outDir"`

	// StartToReady is from starting the controller to its ready URL
	// answering; StartToSettled to its last write request of the start-up
	// (or to ready, if it wrote nothing). Settled is false if it kept
	// writing for the whole settle timeout.
	StartToReady   seconds `json:"startToReadySeconds"`
	StartToSettled seconds `json:"startToSettledSeconds"`
	Settled        bool    `json:"settled"`

	// Idle is sampled after the settle and idle periods, End at the end of
	// the change phase; End.Peak is the peak of the whole run.
	Idle procSample `json:"idle"`
	End  procSample `json:"end"`
	// CPU: until Idle was sampled; during the idle period (in cores, 0.001
	// is a millicore); during the change phase.
	CPUStartup seconds `json:"cpuStartupSeconds"`
	CPUIdle    float64 `json:"cpuIdleCores"`
	CPUChanges seconds `json:"cpuChangesSeconds"`

	Controller latency `json:"controllerLatency"`
	Floor      latency `json:"floorLatency"`
	// P99Ratio is Controller.P99 / Floor.P99.
	P99Ratio float64 `json:"p99Ratio"`

	// Requests are the controller's requests by phase, then "verb resource".
	Requests requestCounts `json:"requests"`
	// ListsAfterStartup are the requests of Requests that list (LIST or
	// watch-list) after the start-up phase; none is the goal.
	ListsAfterStartup []string `json:"listsAfterStartup"`
	// IdleRequestsPerMinute are the requests of the idle phase (of
	// IdlePhase, its length) per minute, Lease requests left out; the run
	// has one controller, so it is per replica. 0 is the goal: nothing is
	// polled.
	IdleRequestsPerMinute float64 `json:"idleRequestsPerMinute"`
	IdlePhase             seconds `json:"idlePhaseSeconds"`

	Correctness correctness `json:"correctness"`

	Create  seconds `json:"createSeconds"`
	Changes seconds `json:"changesSeconds"`
	Total   seconds `json:"totalSeconds"`
}

// correctness counts template changes against the changes made.
type correctness struct {
	Expected         int      `json:"expected"`
	Seen             int      `json:"seen"`
	Missed           int      `json:"missed"`
	Doubled          int      `json:"doubled"`
	MissedWorkloads  []string `json:"missedWorkloads,omitempty"`
	DoubledWorkloads []string `json:"doubledWorkloads,omitempty"`
	// StartupRestarts are template changes before the change phase:
	// a controller should restart nothing when it starts.
	StartupRestarts int `json:"startupRestarts"`
}

// OK tells whether every change restarted its workloads exactly once and
// nothing else was restarted.
func (c correctness) OK() bool {
	return c.Missed == 0 && c.Doubled == 0 && c.StartupRestarts == 0
}

// latency is a summary in milliseconds.
type latency struct {
	N     int     `json:"n"`
	P50ms float64 `json:"p50Ms"`
	P99ms float64 `json:"p99Ms"`
	MaxMs float64 `json:"maxMs"`
}

func newLatency(s summary) latency {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return latency{N: s.N, P50ms: ms(s.P50), P99ms: ms(s.P99), MaxMs: ms(s.Max)}
}

// seconds is a duration written as seconds in JSON.
type seconds float64

func toSeconds(d time.Duration) seconds { return seconds(d.Seconds()) }

// listsAfterStartup returns the requests that list after start-up.
func listsAfterStartup(counts requestCounts) []string {
	var lists []string
	for _, ph := range []string{phaseIdle, phaseChanges} {
		for req, n := range counts[ph] {
			verb, _, _ := strings.Cut(req, " ")
			if n > 0 && (verb == verbList || verb == verbWatchList) {
				lists = append(lists, fmt.Sprintf("%s: %d× %s", ph, n, req))
			}
		}
	}
	slices.Sort(lists)
	return lists
}

// idleRate returns the requests of the idle phase per minute, Lease
// requests left out (a replica renews its Lease every few seconds whatever
// it does), and the idle phase's length: from its start to the next
// phase's. Both are 0 without such a phase.
func idleRate(counts requestCounts, phases []phase) (float64, time.Duration) {
	var d time.Duration
	for i, p := range phases {
		if p.Name == phaseIdle && i+1 < len(phases) {
			d = phases[i+1].Start.Sub(p.Start)
		}
	}
	if d <= 0 {
		return 0, 0
	}
	n := 0
	for req, c := range counts[phaseIdle] {
		if !strings.HasSuffix(req, " leases") {
			n += c
		}
	}
	return float64(n) / d.Minutes(), d
}

// writeTable writes r for people.
func (r *report) writeTable(w io.Writer) error {
	s := r.Scenario
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format+"\n", args...) }
	p("scenario\t%d workloads, %d %s of %d B, %d ref(s) each, %d changes at %g/s (+%d floor changes)",
		s.Workloads, s.Configs, kindPlural(s.Kind), s.Size, s.RefsPerWorkload, s.Changes, s.Rate, s.Changes)
	if s.Policies > 0 {
		p("policies\t%d ReloadPolicies of %d targets in the workloads' namespace, selecting none", s.Policies, s.PolicyTargets)
	}
	p("controller\t%s", r.ControllerCmd)
	settled := ""
	if !r.Settled {
		settled = " (still writing at the settle timeout)"
	}
	p("start to ready\t%.2f s", r.StartToReady)
	p("start to settled\t%.2f s\t(last start-up write)%s", r.StartToSettled, settled)
	p("RSS idle / peak\t%s / %s", mib(r.Idle.RSS), mib(r.End.Peak))
	p("CPU start-up / idle / changes\t%.2f s / %.0f millicores / %.2f s\t(%.1f ms per change)", r.CPUStartup,
		r.CPUIdle*1000, r.CPUChanges, float64(r.CPUChanges)*1000/float64(s.Changes))
	p("")
	p("latency, config write to template change\tn\tp50\tp99\tmax")
	for _, row := range []struct {
		name string
		l    latency
	}{{"controller", r.Controller}, {"floor (benchmark patches itself)", r.Floor}} {
		p("  %s\t%d\t%.1f ms\t%.1f ms\t%.1f ms", row.name, row.l.N, row.l.P50ms, row.l.P99ms, row.l.MaxMs)
	}
	p("  p99 / floor p99\t%.2f", r.P99Ratio)
	p("")
	p("API requests of the controller\tstart-up\tidle\tchanges\tper change")
	for _, req := range sortedRequests(r.Requests) {
		n := r.Requests[phaseChanges][req]
		p("  %s\t%d\t%d\t%d\t%.2f", req, r.Requests[phaseStartup][req], r.Requests[phaseIdle][req],
			n, float64(n)/float64(s.Changes))
	}
	p("  idle, per minute, Leases left out\t\t%.1f\t\t(idle phase %.1f s)", r.IdleRequestsPerMinute, r.IdlePhase)
	if len(r.ListsAfterStartup) == 0 {
		p("  LIST after start-up\tnone")
	} else {
		p("  LIST after start-up\tYES: %s", strings.Join(r.ListsAfterStartup, ", "))
	}
	p("")
	c := r.Correctness
	verdict := "OK"
	if !c.OK() {
		verdict = "FAILED"
	}
	p("template changes\t%d expected, %d seen\t%s", c.Expected, c.Seen, verdict)
	p("  missed / doubled\t%d / %d\t%s", c.Missed, c.Doubled, namedWorkloads(c))
	p("  restarts at start-up\t%d", c.StartupRestarts)
	p("")
	p("wall time\tcreate %.1f s, changes %.1f s, total %.1f s", r.Create, r.Changes, r.Total)
	p("logs\t%s", r.OutDir)
	return tw.Flush()
}

// sortedRequests returns every request of counts, writes first, then by name.
func sortedRequests(counts requestCounts) []string {
	set := map[string]bool{}
	for _, byReq := range counts {
		for req := range byReq {
			set[req] = true
		}
	}
	reqs := slices.Collect(maps.Keys(set))
	slices.SortFunc(reqs, func(a, b string) int {
		va, _, _ := strings.Cut(a, " ")
		vb, _, _ := strings.Cut(b, " ")
		if wa, wb := isWrite(va), isWrite(vb); wa != wb {
			if wa {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	return reqs
}

func namedWorkloads(c correctness) string {
	var parts []string
	if len(c.MissedWorkloads) > 0 {
		parts = append(parts, "missed: "+strings.Join(c.MissedWorkloads, " "))
	}
	if len(c.DoubledWorkloads) > 0 {
		parts = append(parts, "doubled: "+strings.Join(c.DoubledWorkloads, " "))
	}
	return strings.Join(parts, "; ")
}

func mib(bytes int64) string { return fmt.Sprintf("%.1f MiB", float64(bytes)/(1<<20)) }

func kindPlural(kind string) string {
	switch kind {
	case kindSecret:
		return "Secrets"
	case kindConfigMap:
		return "ConfigMaps"
	}
	return "Secrets and ConfigMaps"
}
