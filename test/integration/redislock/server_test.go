package redislock

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is a redis-server process on a free loopback port, without
// persistence, stopped when the test ends.
type redisServer struct {
	Addr string
	cmd  *exec.Cmd
	done chan struct{}
}

func startRedis(t *testing.T) *redisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server is not installed; run hack/install-deps.sh")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	r := &redisServer{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), done: make(chan struct{})}
	r.cmd = exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	go func() { _ = r.cmd.Wait(); close(r.done) }()
	t.Cleanup(r.Kill)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", r.Addr, time.Second)
		if err == nil {
			c.Close()
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server not listening on %s: %v", r.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill stops the server with SIGKILL and waits for it.
func (r *redisServer) Kill() {
	_ = r.cmd.Process.Kill()
	<-r.done
}

// Client returns a client of the server, closed when the test ends.
func (r *redisServer) Client(t *testing.T) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: r.Addr})
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
