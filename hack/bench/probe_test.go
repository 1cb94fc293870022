package main

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestWriteProbe(t *testing.T) {
	g := NewWithT(t)
	var b strings.Builder
	g.Expect(writeProbe(&b, &probeResult{Workloads: 100, Writes: map[string]map[string]int{
		"annotation": {"admin patch deployments": 100, "admin update deployments/status": 100},
		"label":      {"admin patch deployments": 100},
		"configmap":  {"admin create configmaps": 1},
	}})).To(Succeed())
	out := b.String()
	g.Expect(out).To(ContainSubstring("annotation  200   2.00 per workload"))
	g.Expect(out).To(ContainSubstring("label       100   1.00 per workload"))
	g.Expect(out).To(ContainSubstring("replicaset  0     0.00 per workload"), "a place not measured shows as nothing")
	g.Expect(out).To(ContainSubstring("configmap   1     0.01 per workload"))
	g.Expect(out).To(ContainSubstring("  admin update deployments/status"))
}

func TestOptionsProbe(t *testing.T) {
	o := options{Scenario: Scenario{Workloads: 10, Kind: kindSecret, Size: 16, RefsPerWorkload: 1, Changes: 1, Rate: 1, PolicyTargets: 1},
		ReadyURL: "http://127.0.0.1:{healthPort}/readyz", Replicas: 1, InstallProbe: true}
	g := NewWithT(t)
	g.Expect(o.validate()).To(MatchError(ContainSubstring("go with --shared")))
	o.Shared = 100
	g.Expect(o.validate()).To(Succeed(), "the probe runs no controller: no --watcher needed")
}
