package guard

import (
	"fmt"
	"github.com/watcher-dev/watcher/internal/object"
	"sync"
	"time"
)

// Budget holds the restarts of a workload beyond Max in any Window: the
// restart that would be the Max+1-th is held until the oldest leaves the
// window, then brings the workload to the latest content in one rollout.
// Max 0 admits everything. The history is kept in memory, per replica.
//
//	restarts in the last Window   verdict
//	fewer than Max                admit
//	Max                           hold until the oldest + Window
//	any, Request.Released         admit
type Budget struct {
	Max    int
	Window time.Duration

	mu   sync.Mutex
	hist map[object.Ref][]time.Time
}

// NewBudget returns a budget of max restarts per window.
func NewBudget(max int, window time.Duration) *Budget {
	return &Budget{Max: max, Window: window, hist: map[object.Ref][]time.Time{}}
}

// Check implements Gate.
func (b *Budget) Check(r Request) Verdict {
	if b.Max <= 0 || r.Released {
		return Verdict{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.prune(r.Workload, r.Now)
	if len(h) < b.Max {
		return Verdict{}
	}
	until := h[len(h)-b.Max].Add(b.Window)
	return Verdict{Hold: true, Reason: ReasonBudget, Until: until,
		Message: fmt.Sprintf("restarted %d times in the last %s (budget %d per %s); the next restart waits until %s",
			len(h), short(b.Window), b.Max, short(b.Window), until.UTC().Format(time.RFC3339))}
}

// Commit implements Committer: the restart counts.
func (b *Budget) Commit(r Request) {
	if b.Max <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	h := append(b.prune(r.Workload, r.Now), r.Now)
	if len(h) > b.Max { // only the last Max matter
		h = append(h[:0], h[len(h)-b.Max:]...)
	}
	b.hist[r.Workload] = h
}

// prune drops the restarts of key that left the window.
func (b *Budget) prune(key object.Ref, now time.Time) []time.Time {
	h := b.hist[key]
	i := 0
	for i < len(h) && !h[i].After(now.Add(-b.Window)) {
		i++
	}
	if i == len(h) {
		delete(b.hist, key)
		return nil
	}
	h = h[i:]
	b.hist[key] = h
	return h
}

// Sweep forgets the workloads whose restarts all left the window.
func (b *Budget) Sweep(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.hist {
		b.prune(k, now)
	}
}

// Len returns how many workloads have restarts in the window.
func (b *Budget) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.hist)
}
