package main

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestWriteWaves(t *testing.T) {
	g := NewWithT(t)
	var b strings.Builder
	g.Expect(writeWaves(&b, &wavesResult{
		Workloads: 20, Replicas: 3, PDB: true, ReadyDelay: "2s", ControllerCmd: "bin/watcher --restart-strategy=evict", RollAll: 41.5,
		replacementResult: replacementResult{PeakUnavailable: 1, PeakUnavailableAll: 10, PeakRolling: 10, NewPods: 60, ReplacedOnce: true, Done: true},
		Requests:          map[string]int{"create pods/eviction": 60, "list pods": 130},
		InstallWrites:     map[string]int{"bench-controller patch deployments": 20, "system:serviceaccount:kube-system:deployment-controller update deployments/status": 20},
	})).To(Succeed())
	g.Expect(b.String()).To(Equal(`scenario                  20 Deployments of 3 replica(s) with a PodDisruptionBudget (maxUnavailable 1) each share one ConfigMap, changed once; pods Ready 2s after scheduling
controller                bin/watcher --restart-strategy=evict
time to roll all          41.50 s  (every pod replaced and Ready)
peak rollouts at once     10
peak unavailable pods     10 in all, 1 in one Deployment
every pod replaced once   true  (60 new pods for 60)
new ReplicaSets           0
RSS peak                  0.0 MiB
API requests of the controller during the change  all   per restart
  create pods/eviction                            60    3.00
  list pods                                       130   6.50
writes at install, every user (Leases, Events left out)  all   per workload
  in all                                                  40    2.00
  bench-controller patch deployments                      20    1.00
  system:serviceaccount:kube-system:deployment-controller update deployments/status  20    1.00
`))
}

func TestOptionsShared(t *testing.T) {
	base := func() options {
		return options{Scenario: Scenario{Workloads: 10, Kind: kindSecret, Size: 16, RefsPerWorkload: 1, Changes: 1, Rate: 1, PolicyTargets: 1},
			Watcher: "bin/watcher", ReadyURL: "http://127.0.0.1:{healthPort}/readyz", Replicas: 1}
	}
	t.Run("the strategy goes to watcher", func(t *testing.T) {
		g := NewWithT(t)
		o := base()
		o.Shared, o.Replicas, o.PDB, o.Strategy = 20, 3, true, "evict"
		g.Expect(o.validate()).To(Succeed())
		argv, _, err := o.controllerCommand(8080, "/kc")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(argv).To(ContainElement("--restart-strategy=evict"))
		g.Expect(argv).NotTo(ContainElement("--max-concurrent-rollouts=0"), "the shared scenario keeps waves")
	})
	t.Run("invalid", func(t *testing.T) {
		g := NewWithT(t)
		o := base()
		o.Strategy, o.ControllerCmd = "evict", "other"
		g.Expect(o.validate()).To(MatchError(ContainSubstring("--strategy is watcher's")))
		o = base()
		o.Replicas, o.PDB = 3, true
		g.Expect(o.validate()).To(MatchError(ContainSubstring("--replicas, --pdb and --install-probe go with --shared")))
		o = base()
		o.Shared, o.Replicas = 2, 0
		g.Expect(o.validate()).To(MatchError(ContainSubstring("--replicas must be at least 1")))
	})
}
