package lock

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
)

// RedisConfig says how to reach Redis and how long locks live.
type RedisConfig struct {
	// Addr is host:port of Redis, or of nothing when SentinelMaster is set.
	Addr     string
	DB       int
	Username string
	Password string
	// Timeout bounds dialing, reading and writing.
	Timeout time.Duration
	// TLS, when not nil, encrypts the connections.
	TLS *tls.Config
	// SentinelMaster and SentinelAddrs, when set, find the master through
	// Redis Sentinel.
	SentinelMaster   string
	SentinelAddrs    []string
	SentinelPassword string
	// TTL is the longest a lock lives: a replica that dies holding it
	// delays the event by this much at most.
	TTL time.Duration
	// DoneTTL is how long an event stays marked done: longer than any
	// replica can take to see the event.
	DoneTTL time.Duration
	// Replica names this replica in the done markers, for debugging.
	Replica string
}

// keyPrefix starts every key watcher writes in Redis.
const keyPrefix = "watcher:"

// Redis is the Locker of the redis mode: locks are bsm/redislock locks (SET
// NX PX with a random token, released only by their holder), and an event is
// marked done with a key that expires after DoneTTL.
type Redis struct {
	client redis.UniversalClient
	locks  *redislock.Client
	cfg    RedisConfig
}

// NewRedis returns a Redis locker. It does not connect: see Check.
func NewRedis(cfg RedisConfig) *Redis {
	var c redis.UniversalClient
	if cfg.SentinelMaster != "" {
		c = redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: cfg.SentinelMaster, SentinelAddrs: cfg.SentinelAddrs, SentinelPassword: cfg.SentinelPassword,
			DB: cfg.DB, Username: cfg.Username, Password: cfg.Password, TLSConfig: cfg.TLS,
			DialTimeout: cfg.Timeout, ReadTimeout: cfg.Timeout, WriteTimeout: cfg.Timeout,
		})
	} else {
		c = redis.NewClient(&redis.Options{
			Addr: cfg.Addr, DB: cfg.DB, Username: cfg.Username, Password: cfg.Password, TLSConfig: cfg.TLS,
			DialTimeout: cfg.Timeout, ReadTimeout: cfg.Timeout, WriteTimeout: cfg.Timeout,
			// Fail fast and let the work queue retry with backoff.
			MaxRetries: 1,
		})
	}
	return &Redis{client: c, locks: redislock.New(c), cfg: cfg}
}

// Acquire implements Locker. It looks for the done marker before and after
// taking the lock, so that a replica that takes the lock just released by the
// replica that processed the event drops it.
func (r *Redis) Acquire(ctx context.Context, id string) (Lock, Outcome, error) {
	done := keyPrefix + "done:" + id
	if isDone, err := r.isDone(ctx, done); err != nil || isDone {
		return nil, Done, err
	}
	l, err := r.locks.Obtain(ctx, keyPrefix+"lock:"+id, r.cfg.TTL, nil)
	if errors.Is(err, redislock.ErrNotObtained) {
		return nil, Held, nil
	}
	if err != nil {
		return nil, Held, fmt.Errorf("redis lock %s: %w", id, err)
	}
	if isDone, err := r.isDone(ctx, done); err != nil || isDone {
		_ = l.Release(ctx)
		return nil, Done, err
	}
	return &redisLock{lock: l, client: r.client, done: done, cfg: r.cfg}, Acquired, nil
}

func (r *Redis) isDone(ctx context.Context, key string) (bool, error) {
	n, err := r.client.Exists(ctx, key).Result()
	if err != nil {
		return false, fmt.Errorf("redis: %w", err)
	}
	return n > 0, nil
}

// Check implements Locker: it pings Redis.
func (r *Redis) Check(ctx context.Context) error {
	if err := r.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// Close closes the connections.
func (r *Redis) Close() error { return r.client.Close() }

// IsAuthError tells an error Redis gives for wrong credentials, which
// retrying cannot cure, from an unreachable server, which it can.
func IsAuthError(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	for _, prefix := range []string{"WRONGPASS", "NOAUTH", "NOPERM", "ERR AUTH", "ERR invalid password"} {
		if strings.HasPrefix(re.Error(), prefix) {
			return true
		}
	}
	return false
}

type redisLock struct {
	lock   *redislock.Lock
	client redis.UniversalClient
	done   string
	cfg    RedisConfig
}

// ErrExpired is returned by Release when the lock expired before it: another
// replica may have processed the same event, which the resourceVersion
// preconditions make harmless.
var ErrExpired = errors.New("lock expired while the event was processed")

func (l *redisLock) Release(ctx context.Context, processed bool) error {
	var errDone error
	if processed {
		errDone = l.client.Set(ctx, l.done, l.cfg.Replica, l.cfg.DoneTTL).Err()
	}
	err := l.lock.Release(ctx)
	if errors.Is(err, redislock.ErrLockNotHeld) {
		err = ErrExpired
	}
	return errors.Join(errDone, err)
}

// SetLogger sends what the Redis client logs (connection and Sentinel
// events) to log, at debug level.
func SetLogger(log logr.Logger) { redis.SetLogger(redisLogger{log}) }

type redisLogger struct{ log logr.Logger }

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	l.log.V(1).Info("Redis client", "message", fmt.Sprintf(format, v...))
}
