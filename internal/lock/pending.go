package lock

import (
	"context"
	"sync"
	"time"

	"github.com/watcher-dev/watcher/internal/object"
)

// PendingRecheck is how often a change whose users are held is looked at
// again while its lock is kept (see Pending).
const PendingRecheck = 10 * time.Second

// Pending keeps the locks of changes whose users' restarts are held, in
// the lock modes shared by several replicas: the change is not marked done
// while a restart it causes is only in this replica's memory. At most one
// per object: a newer version of the object supersedes the older (its
// users are decided from the newest content anyway). A nil *Pending keeps
// nothing (the lease mode: a new leader decides every workload again at
// start).
//
// As a manager Runnable it gives the kept locks up, not marked done, when
// watcher stops: another replica then takes the changes at once and
// decides their users again from the cluster, rather than after the locks'
// TTL (five minutes by default).
type Pending struct {
	mu    sync.Mutex
	locks map[object.Ref]pendingLock
	// closed: watcher is stopping; nothing more is kept.
	closed bool
}

type pendingLock struct {
	id   string
	lock Lock
}

// NewPending returns the kept locks of the locker l: nil (keep nothing)
// for the Local locker or none.
func NewPending(l Locker) *Pending {
	if _, local := l.(Local); local || l == nil {
		return nil
	}
	return &Pending{locks: map[object.Ref]pendingLock{}}
}

// Take returns the lock kept for the change of obj with id, if any. A lock
// kept for an older version of the object is released as done: the newer
// version is processed now, with the newest content.
func (p *Pending) Take(obj object.Ref, id string) (Lock, Outcome, error) {
	if p == nil {
		return nil, 0, nil
	}
	p.mu.Lock()
	pl, ok := p.locks[obj]
	delete(p.locks, obj)
	p.mu.Unlock()
	switch {
	case !ok:
		return nil, 0, nil
	case pl.id != id:
		go func() { _ = pl.lock.Release(context.Background(), true) }()
		return nil, 0, nil
	}
	return pl.lock, Acquired, nil
}

// Keep keeps the lock l of the change of obj with id; once watcher is
// stopping, it gives l up instead.
func (p *Pending) Keep(obj object.Ref, id string, l Lock) {
	p.mu.Lock()
	closed := p.closed
	if !closed {
		p.locks[obj] = pendingLock{id: id, lock: l}
	}
	p.mu.Unlock()
	if closed {
		_ = l.Release(context.Background(), false)
	}
}

// Start implements manager.Runnable: when ctx ends (watcher stops), it
// gives every kept lock up, not marked done.
func (p *Pending) Start(ctx context.Context) error {
	<-ctx.Done()
	p.mu.Lock()
	p.closed = true
	locks := p.locks
	p.locks = map[object.Ref]pendingLock{}
	p.mu.Unlock()
	for _, pl := range locks {
		// The locker bounds each call itself.
		_ = pl.lock.Release(context.Background(), false)
	}
	return nil
}

// NeedLeaderElection is false: the kept locks are given up on every
// replica.
func (p *Pending) NeedLeaderElection() bool { return false }

// Drop forgets obj's kept lock (released by the caller).
func (p *Pending) Drop(obj object.Ref) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.locks, obj)
}
