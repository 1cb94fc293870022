package e2e

import (
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// redisServer is a redis-server process on a loopback port, without
// persistence: a restart loses every key, like a Redis pod that died.
type redisServer struct {
	Port int
	// prefix comes before the generated arguments (a config file), extra
	// after them; "{port}" in either is replaced by Port.
	prefix, extra []string
	cmd           *exec.Cmd
	done          chan struct{}
}

// startRedis starts redis-server with extra arguments (e.g. "--requirepass",
// "pw") and stops it when the test ends.
func startRedis(t *testing.T, extra ...string) *redisServer {
	t.Helper()
	return startRedisWith(t, nil, extra...)
}

// startRedisWith is startRedis with arguments before the generated ones
// too, such as a config file.
func startRedisWith(t *testing.T, prefix []string, extra ...string) *redisServer {
	t.Helper()
	_, port, _ := net.SplitHostPort(freeAddr(t))
	n, _ := strconv.Atoi(port)
	r := &redisServer{Port: n, prefix: prefix, extra: extra}
	r.Start(t)
	t.Cleanup(r.Kill)
	return r
}

// Start starts the server (again) on its port and waits until it accepts
// connections.
func (r *redisServer) Start(t *testing.T) {
	t.Helper()
	args := append(append(append([]string(nil), r.prefix...),
		"--port", strconv.Itoa(r.Port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"), r.extra...)
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, "{port}", strconv.Itoa(r.Port))
	}
	r.cmd = exec.Command("redis-server", args...)
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	r.done = make(chan struct{})
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(r.cmd, r.done)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", r.Addr(), time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server not listening on %s: %v", r.Addr(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill kills the server with SIGKILL and waits for it.
func (r *redisServer) Kill() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.done
}

// Addr is host:port.
func (r *redisServer) Addr() string { return fmt.Sprintf("127.0.0.1:%d", r.Port) }

// Args are the watcher flags that point at this server in the redis mode.
func (r *redisServer) Args() []string {
	return []string{"--lock=redis", "--redis-host=127.0.0.1", "--redis-port=" + strconv.Itoa(r.Port), "--redis-socket-timeout=1"}
}
