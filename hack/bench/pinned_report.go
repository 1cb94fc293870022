package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pinnedResult is what the pinned scenario measures: one entry per phase,
// unpinned then pinned.
type pinnedResult struct {
	Workloads     int           `json:"workloads"`
	Changes       int           `json:"changes"`
	Rate          float64       `json:"ratePerSecond"`
	Size          int           `json:"sizeBytes"`
	ControllerCmd string        `json:"controllerCmd"`
	Phases        []pinnedPhase `json:"phases"`
}

// pinnedPhase is what one phase's changes cost.
type pinnedPhase struct {
	Name string `json:"name"`
	// Latency is from each ConfigMap write to its workload's template
	// change.
	Latency     latency     `json:"latency"`
	Correctness correctness `json:"correctness"`
	// Snapshots are those made during the phase.
	Snapshots snapshotStats `json:"snapshots"`
	// Requests are the controller's requests during the phase by "verb
	// resource".
	Requests map[string]int `json:"requests"`
}

// lastSnapshots returns the snapshots counted at the end of the last
// phase, or none.
func (r *pinnedResult) lastSnapshots() snapshotStats {
	var all snapshotStats
	for _, p := range r.Phases {
		all = all.plus(p.Snapshots)
	}
	return all
}

// snapshotStats counts snapshots and the bytes of their data.
type snapshotStats struct {
	Objects            int   `json:"objects"`
	ConfigMaps         int   `json:"configMaps"`
	Secrets            int   `json:"secrets"`
	DataBytes          int64 `json:"dataBytes"`
	OwnedByReplicaSets int   `json:"ownedByReplicaSets"`
}

// countSnapshots counts the snapshots among cms and secs: their number,
// the bytes of their data (keys and values, as the API server stores
// them before encoding), and how many have a ReplicaSet among their owners.
func countSnapshots(cms []corev1.ConfigMap, secs []corev1.Secret) snapshotStats {
	var s snapshotStats
	count := func(meta metav1.ObjectMeta, bytes int64) {
		s.Objects++
		s.DataBytes += bytes
		for _, o := range meta.OwnerReferences {
			if o.Kind == "ReplicaSet" {
				s.OwnedByReplicaSets++
				break
			}
		}
	}
	for _, c := range cms {
		s.ConfigMaps++
		var n int64
		for k, v := range c.Data {
			n += int64(len(k) + len(v))
		}
		for k, v := range c.BinaryData {
			n += int64(len(k) + len(v))
		}
		count(c.ObjectMeta, n)
	}
	for _, c := range secs {
		s.Secrets++
		var n int64
		for k, v := range c.Data {
			n += int64(len(k) + len(v))
		}
		count(c.ObjectMeta, n)
	}
	return s
}

func (s snapshotStats) plus(t snapshotStats) snapshotStats {
	return snapshotStats{Objects: s.Objects + t.Objects, ConfigMaps: s.ConfigMaps + t.ConfigMaps, Secrets: s.Secrets + t.Secrets,
		DataBytes: s.DataBytes + t.DataBytes, OwnedByReplicaSets: s.OwnedByReplicaSets + t.OwnedByReplicaSets}
}

func (s snapshotStats) minus(t snapshotStats) snapshotStats {
	return s.plus(snapshotStats{Objects: -t.Objects, ConfigMaps: -t.ConfigMaps, Secrets: -t.Secrets,
		DataBytes: -t.DataBytes, OwnedByReplicaSets: -t.OwnedByReplicaSets})
}

// writePinned prints the phases side by side: latency, snapshots, then the
// controller's requests by verb and resource, in all and per restart.
func writePinned(w io.Writer, r *pinnedResult) error {
	var b strings.Builder
	fmt.Fprintf(&b, "scenario                  %d unpinned and %d pinned Deployments (replicas 0), each reading a ConfigMap (envFrom) and a Secret (volume) of %d B of its own; "+
		"%d ConfigMaps of each set changed at %g/s, unpinned first\n", r.Workloads, r.Workloads, r.Size, r.Changes, r.Rate)
	fmt.Fprintf(&b, "controller                %s\n", r.ControllerCmd)
	fmt.Fprintf(&b, "%-44s", "")
	for _, p := range r.Phases {
		fmt.Fprintf(&b, "  %-22s", p.Name)
	}
	b.WriteString("\n")
	row := func(label string, cell func(pinnedPhase) string) {
		fmt.Fprintf(&b, "%-44s", label)
		for _, p := range r.Phases {
			fmt.Fprintf(&b, "  %-22s", cell(p))
		}
		b.WriteString("\n")
	}
	row("restarts seen / expected (missed, doubled)", func(p pinnedPhase) string {
		return fmt.Sprintf("%d/%d (%d, %d)", p.Correctness.Seen, p.Correctness.Expected, p.Correctness.Missed, p.Correctness.Doubled)
	})
	row("change -> patch p50 / p99 / max, ms", func(p pinnedPhase) string {
		return fmt.Sprintf("%.1f / %.1f / %.1f", p.Latency.P50ms, p.Latency.P99ms, p.Latency.MaxMs)
	})
	row("snapshots made (ConfigMaps + Secrets)", func(p pinnedPhase) string {
		return fmt.Sprintf("%d (%d + %d)", p.Snapshots.Objects, p.Snapshots.ConfigMaps, p.Snapshots.Secrets)
	})
	row("snapshot data, KiB (per restart)", func(p pinnedPhase) string {
		return fmt.Sprintf("%.1f (%.1f)", float64(p.Snapshots.DataBytes)/1024, float64(p.Snapshots.DataBytes)/1024/float64(max(p.Correctness.Expected, 1)))
	})
	row("snapshots owned by a ReplicaSet", func(p pinnedPhase) string { return fmt.Sprintf("%d", p.Snapshots.OwnedByReplicaSets) })
	row("controller requests, all (per restart)", func(p pinnedPhase) string {
		return fmt.Sprintf("%d (%.2f)", total(p.Requests), float64(total(p.Requests))/float64(max(p.Correctness.Expected, 1)))
	})
	keys := map[string]bool{}
	for _, p := range r.Phases {
		for k := range p.Requests {
			keys[k] = true
		}
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		row("  "+k, func(p pinnedPhase) string {
			return fmt.Sprintf("%d (%.2f)", p.Requests[k], float64(p.Requests[k])/float64(max(p.Correctness.Expected, 1)))
		})
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ok tells whether every phase restarted each changed workload once, and
// whether the pinned phase made a snapshot of each source it restarted (a
// ConfigMap and a Secret per restart), each handed to a ReplicaSet: else
// pinning was off, and the pinned figures would be unpinned ones.
func (r *pinnedResult) ok() bool {
	for _, p := range r.Phases {
		if !p.Correctness.OK() {
			return false
		}
		want := 0
		if p.Name == pinPhasePinned {
			want = 2 * p.Correctness.Expected
		}
		if p.Snapshots.Objects != want || p.Snapshots.OwnedByReplicaSets != want {
			return false
		}
	}
	return true
}
