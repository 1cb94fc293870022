// Command demo shows watcher at work on a local control plane it starts
// itself: it runs watcher, deploys a small app that reads a ConfigMap
// through envFrom and a Secret through a volume, changes the ConfigMap and
// shows the rollout that follows. The cluster then keeps running, for you to
// try things with kubectl, until Ctrl-C.
//
//	go run ./hack/demo --watcher bin/watcher      (what `make demo` runs)
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/watcher-dev/watcher/internal/cluster"
)

func main() {
	watcherBin := flag.String("watcher", "bin/watcher", "the watcher binary to run")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *watcherBin); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) { fmt.Printf("\n==> "+format+"\n", args...) }

func run(ctx context.Context, watcherBin string) error {
	step("Starting a local Kubernetes control plane (etcd, kube-apiserver, controller-manager, scheduler, a kwok node)")
	log := funcr.New(func(_, args string) { fmt.Println("    cluster:", args) }, funcr.Options{})
	c, err := cluster.Start(logr.NewContext(ctx, log), cluster.Options{Nodes: 1})
	if err != nil {
		return err
	}
	defer func() {
		step("Stopping watcher and the cluster")
		_ = c.Stop()
	}()
	d := &demo{kubectl: filepath.Join(c.BinDir, "kubectl"), kubeconfig: c.Kubeconfig}

	step("Starting watcher (%s); its log is in %s", watcherBin, filepath.Join(c.LogDir, "watcher.log"))
	stopWatcher, err := startWatcher(ctx, watcherBin, c)
	if err != nil {
		return err
	}
	defer stopWatcher()

	step("Deploying the sample app: Deployment web reads ConfigMap web-config (envFrom) and Secret web-tls (a volume)")
	if err := d.apply(ctx, app); err != nil {
		return err
	}
	if err := d.run(ctx, "-n", "demo", "rollout", "status", "deployment/web", "--timeout=120s"); err != nil {
		return err
	}
	if err := d.waitAdopted(ctx); err != nil {
		return err
	}
	if err := d.run(ctx, "-n", "demo", "get", "replicasets,pods", "-o", "wide"); err != nil {
		return err
	}

	step("Changing LOG_LEVEL in ConfigMap web-config: kubectl -n demo patch configmap web-config -p '{\"data\":{\"LOG_LEVEL\":\"debug\"}}'")
	if err := d.run(ctx, "-n", "demo", "patch", "configmap", "web-config", "-p", `{"data":{"LOG_LEVEL":"debug"}}`); err != nil {
		return err
	}
	step("watcher rolls the Deployment: a new ReplicaSet replaces the old one")
	time.Sleep(2 * time.Second) // the coalescing delay, 1s by default
	if err := d.run(ctx, "-n", "demo", "rollout", "status", "deployment/web", "--timeout=120s"); err != nil {
		return err
	}
	if err := d.run(ctx, "-n", "demo", "get", "replicasets,pods", "-o", "wide"); err != nil {
		return err
	}
	step("The Event watcher left on the Deployment")
	if err := d.run(ctx, "-n", "demo", "get", "events", "--field-selector", "reason=Restarted",
		"-o", "custom-columns=OBJECT:.involvedObject.name,REASON:.reason,MESSAGE:.message"); err != nil {
		return err
	}

	step("Labels only: kubectl -n demo label configmap web-config team=shop (no data change, so no restart)")
	if err := d.run(ctx, "-n", "demo", "label", "configmap", "web-config", "team=shop"); err != nil {
		return err
	}
	time.Sleep(3 * time.Second)
	if err := d.run(ctx, "-n", "demo", "get", "replicasets"); err != nil {
		return err
	}

	step("The cluster keeps running. Try, in another terminal:")
	fmt.Printf("    export KUBECONFIG=%s\n", c.Kubeconfig)
	fmt.Printf("    alias kubectl=%s\n", d.kubectl)
	fmt.Println(`    kubectl -n demo create secret generic web-tls --from-literal=tls.key=rotated --dry-run=client -o yaml | kubectl apply -f -`)
	fmt.Println("    kubectl -n demo get replicasets,pods")
	fmt.Println("Press Ctrl-C to stop.")
	<-ctx.Done()
	return nil
}

// startWatcher runs watcher against the cluster. Its log goes to a file; the
// lines that say what it did are echoed here too.
func startWatcher(ctx context.Context, bin string, c *cluster.Cluster) (stop func(), err error) {
	f, err := os.Create(filepath.Join(c.LogDir, "watcher.log"))
	if err != nil {
		return nil, err
	}
	r, w := io.Pipe()
	cmd := exec.Command(bin, "--print-time=0", "--metrics-addr=127.0.0.1:0", "--health-addr=127.0.0.1:0")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start watcher: %w", err)
	}
	go func() {
		s := bufio.NewScanner(r)
		for s.Scan() {
			line := s.Text()
			fmt.Fprintln(f, line)
			if strings.Contains(line, "changed, keys") || strings.Contains(line, "restarted ") ||
				strings.Contains(line, "Starting watcher") || strings.Contains(line, "ERROR") {
				fmt.Println("    watcher |", line)
			}
		}
	}()
	return func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = w.Close()
		_ = f.Close()
	}, nil
}

type demo struct{ kubectl, kubeconfig string }

// run runs kubectl, showing the command and its output.
func (d *demo) run(ctx context.Context, args ...string) error {
	fmt.Println("    $ kubectl " + strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, d.kubectl, append([]string{"--kubeconfig", d.kubeconfig}, args...)...)
	out := &indent{w: os.Stdout}
	cmd.Stdout, cmd.Stderr = out, out
	defer out.Flush()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

func (d *demo) apply(ctx context.Context, manifest string) error {
	cmd := exec.CommandContext(ctx, d.kubectl, "--kubeconfig", d.kubeconfig, "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(manifest)
	out := &indent{w: os.Stdout}
	cmd.Stdout, cmd.Stderr = out, out
	defer out.Flush()
	return cmd.Run()
}

// waitAdopted waits until watcher has recorded the app's configuration, so
// the change below is one it compares against.
func (d *demo) waitAdopted(ctx context.Context) error {
	for range 120 {
		out, _ := exec.CommandContext(ctx, d.kubectl, "--kubeconfig", d.kubeconfig, "-n", "demo", "get", "deployment", "web",
			"-o", `jsonpath={.metadata.annotations.watcher\.dev/config-hashes}`).Output()
		if len(out) > 0 {
			fmt.Println("    watcher recorded the hashes of web's configuration:", string(out))
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return errors.New("watcher did not adopt deployment web within a minute")
}

// indent prefixes each line kubectl prints, so the demo's own lines stand
// out. kubectl writes in pieces: only whole lines are printed, the rest on
// Flush.
type indent struct {
	w       io.Writer
	mu      sync.Mutex
	partial []byte
}

func (i *indent) Write(p []byte) (int, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.partial = append(i.partial, p...)
	for {
		n := bytes.IndexByte(i.partial, '\n')
		if n < 0 {
			return len(p), nil
		}
		fmt.Fprintf(i.w, "    %s\n", i.partial[:n])
		i.partial = i.partial[n+1:]
	}
}

// Flush prints what is left of an unfinished line.
func (i *indent) Flush() {
	i.mu.Lock()
	defer i.mu.Unlock()
	if len(i.partial) > 0 {
		fmt.Fprintf(i.w, "    %s\n", i.partial)
		i.partial = nil
	}
}
