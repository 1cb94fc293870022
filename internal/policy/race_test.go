//go:build race

package policy

// raceEnabled: the race detector slows every memory access, the
// measurements of TestManyPoliciesCostLittle would say nothing.
const raceEnabled = true
