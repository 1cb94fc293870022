// Package redislock tests internal/lock's Redis locker against a real
// redis-server process, one per test, on a free loopback port: release
// after a cancelled context, refresh of a slow holder, a lost lock, the
// prefixes of two installations, Redis gone. It has no code of its own.
package redislock
