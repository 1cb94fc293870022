// Package integration runs watcher's controller against a real kube-apiserver
// and etcd (started once, through envtest, from the binaries
// hack/controlplane-bins.sh builds) and checks what it does to the cluster.
//
// Each test gets its own namespace and its own watcher instance limited to
// that namespace, so tests run in parallel without seeing each other.
package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/watcher-dev/watcher/test/fixture"
)

var (
	restConfig *rest.Config
	k8s        client.Client
	// klogs captures what client-go logs through klog, which is global.
	klogs = &logBuffer{}
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := binDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	klog.SetLogger(klogs.logger())
	api := &envtest.Environment{BinaryAssetsDirectory: dir}
	restConfig, err = api.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "start kube-apiserver and etcd: %v\n", err)
		return 1
	}
	defer api.Stop()
	k8s, err = client.New(restConfig, client.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env.Client = k8s
	return m.Run()
}

// binDir returns $KUBEBUILDER_ASSETS, or builds the control plane if missing.
func binDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	cmd := exec.Command("bash", filepath.Join("..", "..", "hack", "controlplane-bins.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("build control plane: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// logBuffer collects the lines of a logger; safe for concurrent use.
type logBuffer struct{ lines fixture.Lines }

func (b *logBuffer) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		_, _ = b.lines.Write([]byte(prefix + " " + args + "\n"))
	}, funcr.Options{Verbosity: 1})
}

// Lines returns the lines logged so far that contain every one of subs.
func (b *logBuffer) Lines(subs ...string) []string { return b.lines.Matching(subs...) }

func (b *logBuffer) String() string { return b.lines.String() }

// namespace creates a namespace for one test.
func namespace(t *testing.T) string { return fixture.Namespace(t, k8s) }
