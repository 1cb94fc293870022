package e2e

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/watcher-dev/watcher/test/fixture"
)

func logrInto(ctx context.Context, log logr.Logger) context.Context { return logr.NewContext(ctx, log) }

// proc is a watcher process, with the addresses of its probes and metrics.
type proc struct {
	*fixture.Proc
	HealthAddr  string
	MetricsAddr string
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
	p := &proc{HealthAddr: fixture.FreeAddr(t), MetricsAddr: fixture.FreeAddr(t)}
	for p.MetricsAddr == p.HealthAddr { // a port just freed may be handed out again
		p.MetricsAddr = fixture.FreeAddr(t)
	}
	all := append([]string{
		"--namespaces=" + ns, "--lease-namespace=" + ns, "--log-level=debug", "--coalesce=0", "--print-time=0",
		"--health-addr=" + p.HealthAddr, "--metrics-addr=" + p.MetricsAddr,
	}, args...)
	cmd := exec.Command(watcherBin, all...)
	cmd.Env = append([]string{"KUBECONFIG=" + kube.Kubeconfig, "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	p.Proc = fixture.Start(t, name, cmd)
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
	p.WaitHTTP(t, "http://"+p.HealthAddr+path, timeout)
}

// Ready reports the /readyz status code and body.
func (p *proc) Ready() (int, string) {
	return fixture.HTTPGet("http://" + p.HealthAddr + "/readyz?verbose")
}

// Metrics returns the text of /metrics.
func (p *proc) Metrics(t *testing.T) string {
	t.Helper()
	code, body := fixture.HTTPGet("http://" + p.MetricsAddr + "/metrics")
	if code != http.StatusOK {
		t.Fatalf("%s /metrics: %d %s", p.Name, code, body)
	}
	return body
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

// runUntilCleanup starts cmd, a helper process of a test (another
// project's controller), with its output kept, and kills it when the test
// ends, printing its output if the test failed.
func runUntilCleanup(t *testing.T, name string, cmd *exec.Cmd) {
	t.Helper()
	logs := &fixture.Lines{}
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
