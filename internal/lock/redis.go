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
	// Prefix starts every key of this installation of watcher, so that two
	// installations sharing a Redis never see each other's locks and done
	// markers (see Prefix). Empty: DefaultPrefix.
	Prefix string
}

// DefaultPrefix starts every key when RedisConfig.Prefix is empty.
const DefaultPrefix = "watcher:"

// Prefix returns the key prefix of one installation of watcher: the
// namespace and name of its Lease and the ID of its hash key, as in
// "watcher:shop/watcher/1a2b3c4d:". Kubernetes names hold no spaces and the
// key ID is hex, so neither do the keys.
func Prefix(namespace, name, hashKeyID string) string {
	return DefaultPrefix + namespace + "/" + name + "/" + hashKeyID + ":"
}

// LockKey and DoneKey are the Redis keys of the lock and of the done marker
// of the event named id.
func (c RedisConfig) LockKey(id string) string { return c.prefix() + "lock:" + id }

// DoneKey: see LockKey.
func (c RedisConfig) DoneKey(id string) string { return c.prefix() + "done:" + id }

func (c RedisConfig) prefix() string {
	if c.Prefix == "" {
		return DefaultPrefix
	}
	return c.Prefix
}

// timeout bounds one call to Redis made apart from the caller's context.
func (c RedisConfig) timeout() time.Duration {
	if c.Timeout <= 0 {
		return 5 * time.Second
	}
	return c.Timeout
}

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
// replica that processed the event drops it. The lock it returns is
// refreshed every TTL/3 until Release: see redisLock.
func (r *Redis) Acquire(ctx context.Context, id string) (Lock, Outcome, error) {
	done := r.cfg.DoneKey(id)
	if isDone, err := r.isDone(ctx, done); err != nil || isDone {
		return nil, Done, err
	}
	l, err := r.locks.Obtain(ctx, r.cfg.LockKey(id), r.cfg.TTL, nil)
	if errors.Is(err, redislock.ErrNotObtained) {
		return nil, Held, nil
	}
	if err != nil {
		return nil, Held, fmt.Errorf("redis lock %s: %w", id, err)
	}
	if isDone, err := r.isDone(ctx, done); err != nil || isDone {
		rctx, cancel := detached(ctx, r.cfg.timeout())
		defer cancel()
		_ = l.Release(rctx)
		return nil, Done, err
	}
	return hold(ctx, l, r.client, done, r.cfg), Acquired, nil
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

// SetLogger sends what the Redis client logs (connection and Sentinel
// events) to log, at debug level.
func SetLogger(log logr.Logger) { redis.SetLogger(redisLogger{log}) }

type redisLogger struct{ log logr.Logger }

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	l.log.V(1).Info("Redis client", "message", fmt.Sprintf(format, v...))
}
