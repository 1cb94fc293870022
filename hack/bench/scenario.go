package main

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Kinds of configuration objects a scenario creates (--kind).
const (
	kindSecret    = "secret"
	kindConfigMap = "configmap"
	kindMixed     = "mixed" // even configs are Secrets, odd ones ConfigMaps
)

// minGap is the least time between two changes that should restart the same
// workload, so that no controller may rightly handle them as one.
const minGap = time.Second

// maxFloorPairs bounds the floor workloads (and their configs); beyond it,
// floor changes reuse them, at least maxFloorPairs/rate apart.
const maxFloorPairs = 1000

// Scenario is what the benchmark creates and how it changes it.
//
// Workload i uses configs i, i+1, ..., i+RefsPerWorkload-1 (modulo
// Configs), each through envFrom, a volume or an env keyRef in turn. The
// k-th change rewrites config (k*stride) mod Configs, stride being
// max(RefsPerWorkload, Configs/Changes): as long as
// Changes*RefsPerWorkload <= Configs, no two changes restart the same
// workload. Otherwise Validate checks that changes restarting the same
// workload are at least minGap apart.
//
// Changes are paced at Rate a second; the k-th floor change comes half a
// period after the k-th controller change, so both see the same load.
type Scenario struct {
	Workloads       int     `json:"workloads"`
	Configs         int     `json:"configs"`
	Kind            string  `json:"kind"`
	Size            int     `json:"sizeBytes"`
	RefsPerWorkload int     `json:"refsPerWorkload"`
	Changes         int     `json:"changes"`
	Rate            float64 `json:"ratePerSecond"`
	// Policies ReloadPolicies of PolicyTargets targets each are created
	// in the workloads' namespace, selecting none of them (see
	// createPolicies): the many-policies scenario.
	Policies      int `json:"policies,omitempty"`
	PolicyTargets int `json:"policyTargets,omitempty"`
}

// Validate reports settings that make no sense or changes that would come
// too close together for some workload.
func (s Scenario) Validate() error {
	var errs []error
	if s.Workloads < 1 {
		errs = append(errs, errors.New("--workloads must be at least 1"))
	}
	if s.Configs < 1 {
		errs = append(errs, errors.New("--configs must be at least 1"))
	}
	if s.Kind != kindSecret && s.Kind != kindConfigMap && s.Kind != kindMixed {
		errs = append(errs, fmt.Errorf("--kind %q: want secret, configmap or mixed", s.Kind))
	}
	if s.Size < 16 || s.Size > 900_000 {
		errs = append(errs, fmt.Errorf("--size %d: want 16 to 900000 bytes", s.Size))
	}
	if s.RefsPerWorkload < 1 || s.RefsPerWorkload > s.Configs {
		errs = append(errs, fmt.Errorf("--refs-per-workload %d: want 1 to --configs", s.RefsPerWorkload))
	}
	if s.Changes < 1 {
		errs = append(errs, errors.New("--changes must be at least 1"))
	}
	if s.Rate <= 0 {
		errs = append(errs, errors.New("--rate must be positive"))
	}
	if s.Policies < 0 || s.Policies > 0 && (s.PolicyTargets < 1 || s.PolicyTargets > 100) {
		errs = append(errs, errors.New("--policies must be 0 or more, --policy-targets 1 to 100"))
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if gap, w := s.closestChanges(); gap < minGap {
		return fmt.Errorf("workload %s would be changed twice within %s (want at least %s): lower --rate, or raise --configs",
			workloadName(w), gap, minGap)
	}
	return nil
}

// IsSecret tells whether config j (or floor config j) is a Secret.
func (s Scenario) IsSecret(j int) bool {
	switch s.Kind {
	case kindSecret:
		return true
	case kindConfigMap:
		return false
	}
	return j%2 == 0
}

// Refs returns the configs workload i uses.
func (s Scenario) Refs(i int) []int {
	refs := make([]int, s.RefsPerWorkload)
	for k := range refs {
		refs[k] = (i + k) % s.Configs
	}
	return refs
}

// Users returns the workloads that use config j, in increasing order.
func (s Scenario) Users(j int) []int {
	var users []int
	for k := range s.RefsPerWorkload {
		first := ((j-k)%s.Configs + s.Configs) % s.Configs
		for i := first; i < s.Workloads; i += s.Configs {
			users = append(users, i)
		}
	}
	slices.Sort(users)
	return users
}

// ChangedConfig returns the config the k-th controller change rewrites.
func (s Scenario) ChangedConfig(k int) int {
	stride := max(s.RefsPerWorkload, s.Configs/s.Changes)
	return (k * stride) % s.Configs
}

// FloorPairs is the number of floor workloads, each with its own config.
func (s Scenario) FloorPairs() int {
	return min(s.Changes, maxFloorPairs)
}

// At returns when the k-th controller change (floor false) or floor change
// (floor true) is due, from the start of the change phase.
func (s Scenario) At(k int, floor bool) time.Duration {
	at := float64(k)
	if floor {
		at += 0.5
	}
	return time.Duration(math.Round(at/s.Rate*1e6)) * time.Microsecond
}

// closestChanges returns the shortest time between two controller changes
// that restart the same workload, and that workload; with no such pair, a
// gap longer than any run.
func (s Scenario) closestChanges() (time.Duration, int) {
	last := make(map[int]int) // workload -> index of the last change restarting it
	gap, worst := time.Duration(1<<62), -1
	for k := range s.Changes {
		for _, w := range s.Users(s.ChangedConfig(k)) {
			if prev, ok := last[w]; ok {
				if d := s.At(k, false) - s.At(prev, false); d < gap {
					gap, worst = d, w
				}
			}
			last[w] = k
		}
	}
	return gap, worst
}
