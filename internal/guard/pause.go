package guard

import (
	"fmt"
	"sync"
	"time"

	"github.com/watcher-dev/watcher/internal/object"
)

// Pauses holds the restarts of a workload that has a pause period
// (Request.PausePeriod, from Reloader's
// deployment.reloader.stakater.com/pause-period) until the period, counted
// from the first restart it held, has passed: the changes that arrive
// meanwhile become one rollout, to the latest content, as in Reloader
// (which pauses the Deployment instead; holding the restart needs no write
// and works for every kind). The first times are kept in memory, per
// replica: after a restart of watcher a pending restart waits one period
// again, and is not lost.
//
//	first held restart of the workload    verdict
//	none, or older than two periods       hold until now + period
//	less than a period ago                hold until first + period
//	a period ago or more                  admit
//	no pause period                       admit
type Pauses struct {
	mu    sync.Mutex
	first map[object.Ref]time.Time
}

// NewPauses returns the gate.
func NewPauses() *Pauses { return &Pauses{first: map[object.Ref]time.Time{}} }

// Check implements Gate.
func (p *Pauses) Check(r Request) Verdict {
	if r.PausePeriod <= 0 {
		return Verdict{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	first, ok := p.first[r.Workload]
	// A first time older than two periods belongs to changes restarted
	// or undone long ago (the restart may have been written by another
	// replica): this change starts a period of its own.
	if !ok || r.Now.After(first.Add(2*r.PausePeriod)) {
		first = r.Now
		p.first[r.Workload] = first
	}
	until := first.Add(r.PausePeriod)
	if !r.Now.Before(until) {
		return Verdict{}
	}
	return Verdict{Hold: true, Reason: ReasonPausePeriod, Until: until,
		Message: fmt.Sprintf("pause period %s: the changes until %s roll out together",
			short(r.PausePeriod), until.UTC().Format(time.RFC3339))}
}

// Commit implements Committer: the next change starts a new period.
func (p *Pauses) Commit(r Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.first, r.Workload)
}

// Gone forgets key: the workload was deleted.
func (p *Pauses) Gone(key object.Ref) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.first, key)
}
