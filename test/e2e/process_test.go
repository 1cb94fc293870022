package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

func logrInto(ctx context.Context, log logr.Logger) context.Context { return logr.NewContext(ctx, log) }

// lines collects the lines a process writes; safe for concurrent use.
type lines struct {
	mu      sync.Mutex
	partial string
	all     []string
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.partial + string(p)
	parts := strings.Split(s, "\n")
	l.all = append(l.all, parts[:len(parts)-1]...)
	l.partial = parts[len(parts)-1]
	return len(p), nil
}

// Matching returns the lines containing every one of subs.
func (l *lines) Matching(subs ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
next:
	for _, line := range l.all {
		for _, s := range subs {
			if !strings.Contains(line, s) {
				continue next
			}
		}
		out = append(out, line)
	}
	return out
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

// proc is a watcher process.
type proc struct {
	Name        string
	Logs        *lines
	HealthAddr  string
	MetricsAddr string
	cmd         *exec.Cmd
	done        chan struct{}
}

// startWatcher starts bin/watcher against the cluster, limited to ns, with
// debug logs, no coalescing delay, free ports and its Lease in ns, followed
// by args (which win). It waits until /healthz answers and stops the process
// when the test ends.
func startWatcher(t *testing.T, name, ns string, args ...string) *proc {
	t.Helper()
	return startWatcherEnv(t, name, ns, nil, args...)
}

// startWatcherEnv is startWatcher with extra environment variables
// ("NAME=value") on top of the clean environment it passes.
func startWatcherEnv(t *testing.T, name, ns string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{Name: name, Logs: &lines{}, HealthAddr: freeAddr(t), MetricsAddr: freeAddr(t), done: make(chan struct{})}
	for p.MetricsAddr == p.HealthAddr { // a port just freed may be handed out again
		p.MetricsAddr = freeAddr(t)
	}
	all := append([]string{
		"--namespaces=" + ns, "--lease-namespace=" + ns, "--log-level=debug", "--coalesce=0", "--print-time=0",
		"--health-addr=" + p.HealthAddr, "--metrics-addr=" + p.MetricsAddr,
	}, args...)
	p.cmd = exec.Command(watcherBin, all...)
	p.cmd.Env = append([]string{"KUBECONFIG=" + kube.Kubeconfig, "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	p.cmd.Stdout, p.cmd.Stderr = p.Logs, p.Logs
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("log of %s:\n%s", name, p.Logs)
		}
	})
	p.waitHTTP(t, "/healthz", 30*time.Second)
	return p
}

// WaitReady waits until /readyz answers 200.
func (p *proc) WaitReady(t *testing.T) {
	t.Helper()
	p.waitHTTP(t, "/readyz", 60*time.Second)
}

func (p *proc) waitHTTP(t *testing.T, path string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if code, _ := p.get(p.HealthAddr, path); code == http.StatusOK {
			return
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited (%v) before %s answered:\n%s", p.Name, p.cmd.ProcessState, path, p.Logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s not OK after %s:\n%s", p.Name, path, timeout, p.Logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *proc) get(addr, path string) (int, string) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Ready reports the /readyz status code and body.
func (p *proc) Ready() (int, string) { return p.get(p.HealthAddr, "/readyz?verbose") }

// Metrics returns the text of /metrics.
func (p *proc) Metrics(t *testing.T) string {
	t.Helper()
	code, body := p.get(p.MetricsAddr, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("%s /metrics: %d %s", p.Name, code, body)
	}
	return body
}

// Kill kills the process with SIGKILL and waits for it.
func (p *proc) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Stop sends SIGTERM and waits (SIGKILL after 20s).
func (p *proc) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.Kill()
	}
}

// Exited waits for the process to end by itself and returns its exit code.
func (p *proc) Exited(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("%s still running after %s:\n%s", p.Name, timeout, p.Logs)
		return -1
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// runWatcher runs the binary to completion (for start-up errors) and
// returns its exit code and output.
func runWatcher(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, watcherBin, args...)
	cmd.Env = append([]string{"KUBECONFIG=" + kube.Kubeconfig, "PATH=" + os.Getenv("PATH")}, env...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("watcher %v did not exit: %s", args, out)
	}
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("run watcher: %v", err)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

var _ = fmt.Sprint

// runUntilCleanup starts cmd, a helper process of a test (another
// project's controller), with its output kept, and kills it when the test
// ends, printing its output if the test failed.
func runUntilCleanup(t *testing.T, name string, cmd *exec.Cmd) {
	t.Helper()
	logs := &lines{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("log of %s:\n%s", name, logs)
		}
	})
}
