package install

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/test/fixture"
)

// proc is a watcher process and the address of its probes.
type proc struct {
	*fixture.Proc
	HealthAddr string
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
	p := &proc{HealthAddr: fixture.FreeAddr(t)}
	env := []string{"KUBECONFIG=" + kubeconfig, "HOME=/nonexistent"}
	c := d.Spec.Template.Spec.Containers[0]
	for _, e := range c.Env {
		env = append(env, e.Name+"="+envValue(t, d.Namespace, c, e))
	}
	metricsAddr := fixture.FreeAddr(t)
	for metricsAddr == p.HealthAddr { // a port just freed may be handed out again
		metricsAddr = fixture.FreeAddr(t)
	}
	env = append(env, "HEALTH_ADDR="+p.HealthAddr, "METRICS_ADDR="+metricsAddr)
	if len(c.Command) > 0 {
		t.Fatalf("container %s has a command %v: the image's entrypoint is watcher", c.Name, c.Command)
	}
	args := withAddr(withAddr(c.Args, "--health-addr", p.HealthAddr), "--metrics-addr", metricsAddr)
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	p.Proc = fixture.Start(t, "watcher", cmd)
	p.WaitHTTP(t, "http://"+p.HealthAddr+"/readyz", wait)
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

// noForbidden fails the test if watcher was refused anything.
func noForbidden(t *testing.T, p *proc) {
	t.Helper()
	for _, l := range strings.Split(p.Logs.String(), "\n") {
		if strings.Contains(l, "forbidden") {
			t.Errorf("watcher was refused: %s", l)
		}
	}
}
