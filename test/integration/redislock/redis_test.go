package redislock

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/watcher-dev/watcher/internal/lock"
	"github.com/watcher-dev/watcher/test/fixture"
)

const id = "ConfigMap/shop/web-config/0b6f1c9e-4a3f-4d2b-9a57-3f1e2d4c5b6a@1234"

// newRedis returns a Redis locker of the server with the given prefix and
// lock TTL, closed when the test ends.
func newRedis(t *testing.T, r *fixture.Redis, prefix string, ttl time.Duration) *lock.Redis {
	t.Helper()
	l := lock.NewRedis(lock.RedisConfig{Addr: r.Addr(), Timeout: time.Second, TTL: ttl, DoneTTL: time.Minute, Replica: t.Name(), Prefix: prefix})
	t.Cleanup(func() { l.Close() })
	return l
}

func acquire(t *testing.T, ctx context.Context, l lock.Locker, want lock.Outcome) lock.Lock {
	t.Helper()
	held, got, err := l.Acquire(ctx, id)
	if err != nil {
		t.Fatalf("Acquire(%s) error: %v", id, err)
	}
	if got != want {
		t.Fatalf("Acquire(%s) = %v, want %v", id, got, want)
	}
	return held
}

// TestReleaseAfterCancel: a replica stopped with SIGTERM cancels the context
// of its work; Release must still delete its lock (and, if the work was
// done, write the done marker), so that another replica takes the event at
// once instead of after the TTL.
func TestReleaseAfterCancel(t *testing.T) {
	srv := startRedis(t)
	raw := client(t, srv)
	cfg := lock.RedisConfig{Prefix: lock.Prefix("watcher", "watcher", "k1")}
	for _, tt := range []struct {
		name      string
		processed bool
		next      lock.Outcome // what another replica then gets
	}{
		{"not processed", false, lock.Acquired},
		{"processed", true, lock.Done},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := raw.FlushAll(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			a, b := newRedis(t, srv, cfg.Prefix, time.Hour), newRedis(t, srv, cfg.Prefix, time.Hour)
			ctx, cancel := context.WithCancel(context.Background())
			held := acquire(t, ctx, a, lock.Acquired)
			acquire(t, context.Background(), b, lock.Held)
			cancel()
			if err := held.Release(ctx, tt.processed); err != nil {
				t.Fatalf("Release after cancel: %v", err)
			}
			if exists(t, raw, cfg.LockKey(id)) {
				t.Errorf("lock key %s still exists after Release", cfg.LockKey(id))
			}
			if got := exists(t, raw, cfg.DoneKey(id)); got != tt.processed {
				t.Errorf("done marker exists = %v, want %v", got, tt.processed)
			}
			acquire(t, context.Background(), b, tt.next)
		})
	}
}

// TestRefreshKeepsSlowHolder: a holder that works for several TTLs keeps its
// lock: others find it held throughout, and its Release succeeds.
func TestRefreshKeepsSlowHolder(t *testing.T) {
	srv := startRedis(t)
	const ttl = 300 * time.Millisecond
	prefix := lock.Prefix("watcher", "watcher", "k1")
	a, b := newRedis(t, srv, prefix, ttl), newRedis(t, srv, prefix, ttl)
	held := acquire(t, context.Background(), a, lock.Acquired)
	for end := time.Now().Add(4 * ttl); time.Now().Before(end); time.Sleep(ttl / 4) {
		acquire(t, context.Background(), b, lock.Held)
	}
	if err := held.Release(context.Background(), true); err != nil {
		t.Fatalf("Release after %s of work with a TTL of %s: %v", 4*ttl, ttl, err)
	}
	acquire(t, context.Background(), b, lock.Done)
}

// TestLostLockReportsExpired: when the lock is lost anyway (here: deleted
// and taken by another replica, as after a Redis failover or a stall longer
// than the TTL), Release reports ErrExpired and leaves the other replica's
// lock alone.
func TestLostLockReportsExpired(t *testing.T) {
	srv := startRedis(t)
	raw := client(t, srv)
	const ttl = 300 * time.Millisecond
	cfg := lock.RedisConfig{Prefix: lock.Prefix("watcher", "watcher", "k1")}
	a, b := newRedis(t, srv, cfg.Prefix, ttl), newRedis(t, srv, cfg.Prefix, ttl)
	held := acquire(t, context.Background(), a, lock.Acquired)
	if err := raw.Del(context.Background(), cfg.LockKey(id)).Err(); err != nil {
		t.Fatal(err)
	}
	other := acquire(t, context.Background(), b, lock.Acquired)
	time.Sleep(ttl) // a refresh of a's finds the lock taken
	if err := held.Release(context.Background(), false); !errors.Is(err, lock.ErrExpired) {
		t.Fatalf("Release of a lost lock = %v, want ErrExpired", err)
	}
	if !exists(t, raw, cfg.LockKey(id)) {
		t.Fatal("the release of a lost lock deleted the new holder's lock")
	}
	if err := other.Release(context.Background(), false); err != nil {
		t.Fatalf("Release by the new holder: %v", err)
	}
}

// TestPrefixesApart: two installations sharing a Redis (another namespace,
// Lease or hash key) neither see each other's locks nor each other's done
// markers; replicas of one installation see both.
func TestPrefixesApart(t *testing.T) {
	srv := startRedis(t)
	raw := client(t, srv)
	mine := lock.Prefix("shop", "watcher", "1a2b3c4d")
	for _, tt := range []struct {
		name, other string
		held, done  lock.Outcome // what the other locker gets while a lock is held, once it is done
	}{
		{"same installation", mine, lock.Held, lock.Done},
		{"other namespace", lock.Prefix("bank", "watcher", "1a2b3c4d"), lock.Acquired, lock.Acquired},
		{"other lease", lock.Prefix("shop", "watcher-2", "1a2b3c4d"), lock.Acquired, lock.Acquired},
		{"other hash key", lock.Prefix("shop", "watcher", "9f8e7d6c"), lock.Acquired, lock.Acquired},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := raw.FlushAll(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			a, b := newRedis(t, srv, mine, time.Minute), newRedis(t, srv, tt.other, time.Minute)
			held := acquire(t, context.Background(), a, lock.Acquired)
			if l := acquire(t, context.Background(), b, tt.held); l != nil {
				if err := l.Release(context.Background(), false); err != nil {
					t.Fatal(err)
				}
			}
			if err := held.Release(context.Background(), true); err != nil {
				t.Fatal(err)
			}
			if l := acquire(t, context.Background(), b, tt.done); l != nil {
				if err := l.Release(context.Background(), true); err != nil {
					t.Fatal(err)
				}
			}
			keys, err := raw.Keys(context.Background(), "*").Result()
			if err != nil {
				t.Fatal(err)
			}
			valid := regexp.MustCompile(`^watcher:[a-z0-9-]+/[a-z0-9.-]+/[0-9a-f]+:done:\S+$`)
			for _, k := range keys {
				if !valid.MatchString(k) {
					t.Errorf("key %q is not of the form watcher:<namespace>/<lease>/<key ID>:done:<id> without spaces", k)
				}
			}
		})
	}
}

// TestReleaseRedisGone: with Redis gone, Release fails within its timeout
// rather than hanging the shutdown of the replica.
func TestReleaseRedisGone(t *testing.T) {
	srv := startRedis(t)
	a := newRedis(t, srv, "", time.Minute)
	held := acquire(t, context.Background(), a, lock.Acquired)
	srv.Kill()
	start := time.Now()
	if err := held.Release(context.Background(), true); err == nil || errors.Is(err, lock.ErrExpired) {
		t.Errorf("Release with Redis gone = %v, want a connection error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Release with Redis gone took %s", d)
	}
}
