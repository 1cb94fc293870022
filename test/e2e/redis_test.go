package e2e

import "github.com/watcher-dev/watcher/test/fixture"

// redisServer is a redis-server process of a test (test/fixture's).
type redisServer = fixture.Redis

var (
	startRedis     = fixture.StartRedis
	startRedisWith = fixture.StartRedisWith
)
