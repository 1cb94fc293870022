package controller

import (
	"context"
	"sync"
	"time"

	"github.com/watcher-dev/watcher/internal/lock"
)

// heldRecheck is how often a change whose users are held is looked at
// again while its lock is kept (see pendingLocks).
const heldRecheck = 10 * time.Second

// pendingLocks keeps the locks of changes whose users' restarts are held,
// in the lock modes shared by several replicas: the change is not marked
// done while a restart it causes is only in this replica's memory. At most
// one per object: a newer version of the object supersedes the older
// (its users are decided from the newest content anyway). A nil
// *pendingLocks keeps nothing (the lease mode: a new leader decides every
// workload again at start).
type pendingLocks struct {
	mu    sync.Mutex
	locks map[Change]pendingLock
}

type pendingLock struct {
	id   string
	lock lock.Lock
}

func newPendingLocks(l lock.Locker) *pendingLocks {
	if _, local := l.(lock.Local); local || l == nil {
		return nil
	}
	return &pendingLocks{locks: map[Change]pendingLock{}}
}

// take returns the lock kept for req's change id, if any. A lock kept for
// an older version of the object is released as done: the newer version
// is processed now, with the newest content.
func (p *pendingLocks) take(req Change, id string) (lock.Lock, lock.Outcome, error) {
	if p == nil {
		return nil, 0, nil
	}
	p.mu.Lock()
	pl, ok := p.locks[req]
	delete(p.locks, req)
	p.mu.Unlock()
	switch {
	case !ok:
		return nil, 0, nil
	case pl.id != id:
		go func() { _ = pl.lock.Release(context.Background(), true) }()
		return nil, 0, nil
	}
	return pl.lock, lock.Acquired, nil
}

// keep keeps the lock l of req's change id.
func (p *pendingLocks) keep(req Change, id string, l lock.Lock) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.locks[req] = pendingLock{id: id, lock: l}
}

// drop forgets req's kept lock (released by the caller).
func (p *pendingLocks) drop(req Change) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.locks, req)
}
