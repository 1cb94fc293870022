package guard

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/watcher-dev/watcher/internal/object"
)

// Budget holds the restarts of a workload beyond Max in any Window: the
// restart that would be the Max+1-th is held until the oldest leaves the
// window, then brings the workload to the latest content in one rollout.
// Max 0 admits everything. The history is the restarts this replica wrote
// and those the cluster keeps on the workload (Request.History, from
// StateAnnotation), so that it survives a restart of watcher and a lease
// handover.
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
	h := b.merged(r)
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
	h := append(b.merged(r), r.Now)
	if len(h) > b.Max { // only the last Max matter
		h = append(h[:0], h[len(h)-b.Max:]...)
	}
	b.hist[r.Workload] = h
}

// merged returns, b.mu held, the restarts of r's workload within the window: those of
// this replica and those of r.History, each once (to the second, the
// precision of StateAnnotation), oldest first.
func (b *Budget) merged(r Request) []time.Time {
	h := slices.Clone(b.prune(r.Workload, r.Now))
	for _, t := range r.History {
		if t.After(r.Now.Add(-b.Window)) && !slices.ContainsFunc(h, func(x time.Time) bool { return x.Unix() == t.Unix() }) {
			h = append(h, t)
		}
	}
	slices.SortFunc(h, time.Time.Compare)
	return h
}

// Times returns the restarts to keep in the cluster after a restart of r
// written at r.Now: those within the window, r.Now included, at most Max
// (MaxStateTimes).
func (b *Budget) Times(r Request) []time.Time {
	if b.Max <= 0 {
		return []time.Time{r.Now}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	h := append(b.merged(r), r.Now)
	if n := min(b.Max, MaxStateTimes); len(h) > n {
		h = h[len(h)-n:]
	}
	return h
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
