// Package e2e runs the built watcher binary, as separate processes, against a
// whole local control plane (etcd, kube-apiserver, controller-manager,
// scheduler and kwok nodes, see internal/cluster) and, for the redis lock
// mode, real redis-server processes. It checks what a user would see: new
// ReplicaSets and Pods running the new template, exactly once per change.
//
// The binary is $WATCHER_BIN (make test sets it), else it is built into a
// temporary folder.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/watcher-dev/watcher/internal/cluster"
	"github.com/watcher-dev/watcher/test/fixture"
)

var (
	kube       *cluster.Cluster
	k8s        client.Client
	watcherBin string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if _, err := exec.LookPath("redis-server"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: redis-server is not installed; run hack/install-deps.sh")
		return 1
	}
	tmp, err := os.MkdirTemp("", "watcher-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	if watcherBin = os.Getenv("WATCHER_BIN"); watcherBin == "" {
		watcherBin = filepath.Join(tmp, "watcher")
		build := exec.Command("go", "build", "-o", watcherBin, "../../cmd/watcher")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: build watcher: %v\n", err)
			return 1
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	log := funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, "cluster:", args) }, funcr.Options{})
	ctrllog.SetLogger(log)
	kube, err = cluster.Start(logrInto(ctx, log), cluster.Options{Nodes: 1})
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: start cluster: %v\n", err)
		return 1
	}
	defer kube.Stop()
	cfg := kube.RESTConfig()
	cfg.QPS, cfg.Burst = 1000, 2000 // the tests make bursts of changes
	if k8s, err = client.New(cfg, client.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env.Client = k8s
	return m.Run()
}

// namespace creates a namespace for one test.
func namespace(t *testing.T) string { return fixture.Namespace(t, k8s) }
