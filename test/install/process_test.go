package install

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// logs collects a process's output.
type logs struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// proc is a watcher process.
type proc struct {
	Logs       *logs
	HealthAddr string
	cmd        *exec.Cmd
	done       chan struct{}
}

// startWatcher runs bin (the watcher binary) with the arguments and the
// environment of the release's Deployment d, as its pod in namespace ns
// would get them, and the kubeconfig given; /metrics and the probes listen
// on free local ports (HEALTH_ADDR and METRICS_ADDR, and any
// --health-addr or --metrics-addr of the arguments, moved there: the
// host is shared). It waits until /readyz answers and stops the process
// when the test ends.
func startWatcher(t *testing.T, bin string, d *appsv1.Deployment, kubeconfig string, cred *syscall.Credential) *proc {
	t.Helper()
	p := &proc{Logs: &logs{}, HealthAddr: freeAddr(t), done: make(chan struct{})}
	env := []string{"KUBECONFIG=" + kubeconfig, "HOME=/nonexistent"}
	c := d.Spec.Template.Spec.Containers[0]
	for _, e := range c.Env {
		env = append(env, e.Name+"="+envValue(t, d.Namespace, c, e))
	}
	metricsAddr := freeAddr(t)
	for metricsAddr == p.HealthAddr { // a port just freed may be handed out again
		metricsAddr = freeAddr(t)
	}
	env = append(env, "HEALTH_ADDR="+p.HealthAddr, "METRICS_ADDR="+metricsAddr)
	if len(c.Command) > 0 {
		t.Fatalf("container %s has a command %v: the image's entrypoint is watcher", c.Name, c.Command)
	}
	args := withAddr(withAddr(c.Args, "--health-addr", p.HealthAddr), "--metrics-addr", metricsAddr)
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.Logs, p.Logs
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: cred}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start watcher: %v", err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("log of watcher:\n%s", p.Logs)
		}
	})
	p.waitReady(t)
	return p
}

// withAddr returns args with the value of flag (--flag=value or --flag
// value) replaced by addr, if the flag is there.
func withAddr(args []string, flag, addr string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		switch {
		case a == flag && i+1 < len(out):
			out[i+1] = addr
		case strings.HasPrefix(a, flag+"="):
			out[i] = flag + "=" + addr
		}
	}
	return out
}

// envValue resolves an env var of container c of the pod: a value, the
// pod's namespace, a resource of the container (in bytes or cores, as the
// kubelet gives it with divisor 1), or a key of a Secret.
func envValue(t *testing.T, ns string, c corev1.Container, e corev1.EnvVar) string {
	t.Helper()
	switch {
	case e.ValueFrom == nil:
		return e.Value
	case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
		return ns
	case e.ValueFrom.ResourceFieldRef != nil && e.ValueFrom.ResourceFieldRef.Resource == "limits.memory":
		return fmt.Sprint(c.Resources.Limits.Memory().Value())
	case e.ValueFrom.SecretKeyRef != nil:
		s := &corev1.Secret{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: e.ValueFrom.SecretKeyRef.Name}, s); err != nil {
			t.Fatalf("env %s: %v", e.Name, err)
		}
		return string(s.Data[e.ValueFrom.SecretKeyRef.Key])
	}
	t.Fatalf("env %s: unsupported valueFrom", e.Name)
	return ""
}

func (p *proc) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		c := http.Client{Timeout: 2 * time.Second}
		resp, err := c.Get("http://" + p.HealthAddr + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-p.done:
			t.Fatalf("watcher exited (%v) before it was ready:\n%s", p.cmd.ProcessState, p.Logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("watcher not ready after %s:\n%s", wait, p.Logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
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
		_ = p.cmd.Process.Kill()
		<-p.done
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

// noForbidden fails the test if watcher was refused anything.
func noForbidden(t *testing.T, p *proc) {
	t.Helper()
	for _, l := range strings.Split(p.Logs.String(), "\n") {
		if strings.Contains(l, "forbidden") {
			t.Errorf("watcher was refused: %s", l)
		}
	}
}
