package lock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
)

// ErrExpired is returned by Release when the lock expired before it: another
// replica may have processed the same event, which the resourceVersion
// preconditions make harmless.
var ErrExpired = errors.New("lock expired while the event was processed")

// redisLock is a held Redis lock. From Acquire to Release a goroutine
// refreshes it every TTL/3, so that a replica whose work outlasts the TTL
// keeps its lock, while one that dies loses it after the TTL at most.
//
// The refreshes and Release run apart from the caller's context: a replica
// stopped with SIGTERM cancels its work, and must still give its locks up at
// once rather than leave them to expire.
type redisLock struct {
	lock   *redislock.Lock
	client redis.UniversalClient
	done   string
	cfg    RedisConfig

	stop    context.CancelFunc
	stopped chan struct{}
	// lost is set when a refresh found the lock no longer ours.
	lost atomic.Bool
}

// hold returns the lock l and starts refreshing it.
func hold(ctx context.Context, l *redislock.Lock, c redis.UniversalClient, done string, cfg RedisConfig) *redisLock {
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	h := &redisLock{lock: l, client: c, done: done, cfg: cfg, stop: stop, stopped: make(chan struct{})}
	go h.refresh(rctx)
	return h
}

// refresh extends the lock to a full TTL every TTL/3 until ctx is done or
// the lock is found lost. A refresh that fails because Redis does not answer
// is tried again at the next tick: two may fail before the lock expires.
func (l *redisLock) refresh(ctx context.Context) {
	defer close(l.stopped)
	t := time.NewTicker(max(l.cfg.TTL/3, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, l.cfg.timeout())
		err := l.lock.Refresh(cctx, l.cfg.TTL, nil)
		cancel()
		if errors.Is(err, redislock.ErrNotObtained) {
			l.lost.Store(true)
			return
		}
	}
}

// Release implements Lock. It stops the refreshes, marks the event done if
// it was processed, and deletes the lock, whether or not ctx is cancelled:
// each call to Redis is bounded by the socket timeout instead.
func (l *redisLock) Release(ctx context.Context, processed bool) error {
	l.stop()
	<-l.stopped
	ctx, cancel := detached(ctx, 2*l.cfg.timeout())
	defer cancel()
	var errDone error
	if processed {
		if err := l.client.Set(ctx, l.done, l.cfg.Replica, l.cfg.DoneTTL).Err(); err != nil {
			errDone = fmt.Errorf("mark the event done: %w", err)
		}
	}
	err := l.lock.Release(ctx)
	switch {
	case l.lost.Load() || errors.Is(err, redislock.ErrLockNotHeld):
		err = ErrExpired
	case err != nil:
		err = fmt.Errorf("release redis lock: %w", err)
	}
	return errors.Join(errDone, err)
}

// detached returns a context with the values of ctx but not its
// cancellation, ending after timeout.
func detached(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), timeout)
}
