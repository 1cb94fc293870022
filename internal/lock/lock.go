// Package lock decides which replica processes a change event.
//
// Every replica sees every event. With leader election (or a single replica)
// only one replica is active, and the Local locker lets it process every
// event. In the redis mode all replicas are active and Redis decides: the
// first replica to take an event's lock processes it and, when done, marks
// the event done so that the others drop it; a replica that finds the lock
// taken looks again later. The holder refreshes its lock while it works, so
// that work longer than the lock's TTL is not taken over, and releases it
// even when its work was cancelled (a replica stopped with SIGTERM), so that
// another replica takes the event over at once; only an event whose holder
// died (SIGKILL, a lost node) waits for the lock to expire.
//
// A lock is only an optimisation of who works: the writes that restart
// workloads carry a resourceVersion precondition and are derived from hashes,
// so even two replicas processing the same event restart nothing twice.
package lock

import "context"

// Outcome is the result of Acquire.
type Outcome int

const (
	// Acquired: this replica holds the lock and must process the event.
	Acquired Outcome = iota
	// Held: another replica holds the lock; look again later.
	Held
	// Done: another replica has processed the event; drop it.
	Done
)

// Locker hands out the locks of change events.
type Locker interface {
	// Acquire tries once to take the lock of the event named id. The Lock
	// is non-nil only when the outcome is Acquired.
	Acquire(ctx context.Context, id string) (Lock, Outcome, error)
	// Check reports whether the locker can hand out locks: nil when it can.
	Check(ctx context.Context) error
}

// Lock is a held lock. Its holder must call Release exactly once, also when
// its context was cancelled.
type Lock interface {
	// Release gives the lock up. With processed true, the event is marked
	// done, so other replicas drop it; with false (processing failed), the
	// next replica to take the lock processes it again. Release works even
	// when ctx is cancelled: it keeps ctx's values, not its cancellation.
	Release(ctx context.Context, processed bool) error
}

// Local is the Locker of a replica that processes every event itself: the
// only replica, or the leader.
type Local struct{}

// Acquire always succeeds.
func (Local) Acquire(context.Context, string) (Lock, Outcome, error) { return noLock{}, Acquired, nil }

// Check always succeeds.
func (Local) Check(context.Context) error { return nil }

type noLock struct{}

func (noLock) Release(context.Context, bool) error { return nil }
