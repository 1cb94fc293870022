package redislock

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/watcher-dev/watcher/test/fixture"
)

// startRedis starts a redis-server (test/fixture's) for one test.
func startRedis(t *testing.T) *fixture.Redis { return fixture.StartRedis(t) }

// client returns a client of the server, closed when the test ends.
func client(t *testing.T, r *fixture.Redis) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: r.Addr()})
	t.Cleanup(func() { c.Close() })
	return c
}

// exists reports whether key exists.
func exists(t *testing.T, c *redis.Client, key string) bool {
	t.Helper()
	n, err := c.Exists(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("exists %s: %v", key, err)
	}
	return n > 0
}
