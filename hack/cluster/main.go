// Command cluster starts a local Kubernetes control plane with kwok Nodes
// (see internal/cluster), prints how to reach it and runs until Ctrl-C or
// SIGTERM, then tears it all down.
//
//	go run ./hack/cluster --nodes=3 --kubeconfig-out=/tmp/watcher.kubeconfig
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/watcher-dev/watcher/internal/cluster"
)

func main() {
	nodes := flag.Int("nodes", 1, "number of kwok Nodes to create")
	podsPerNode := flag.Int("pods-per-node", 1000, "allocatable pods of each Node")
	kubeconfigOut := flag.String("kubeconfig-out", "", "also copy the admin kubeconfig to this path")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, cluster.Options{Nodes: *nodes, PodsPerNode: *podsPerNode}, *kubeconfigOut)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

// run starts the cluster, prints how to use it and waits for ctx to end.
func run(ctx context.Context, opts cluster.Options, kubeconfigOut string) error {
	log := funcr.New(func(_, args string) { fmt.Fprintln(os.Stderr, "cluster:", args) }, funcr.Options{})
	c, err := cluster.Start(logr.NewContext(ctx, log), opts)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(os.Stderr, "cluster: stopping")
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "cluster:", err)
		}
	}()

	kubeconfig := c.Kubeconfig
	if kubeconfigOut != "" {
		if err := copyFile(c.Kubeconfig, kubeconfigOut); err != nil {
			return err
		}
		kubeconfig = kubeconfigOut
	}
	fmt.Printf("API server: %s\n", c.APIServerURL)
	fmt.Printf("kubeconfig: %s\n", kubeconfig)
	fmt.Printf("logs:       %s\n", c.LogDir)
	fmt.Printf("try:        %s --kubeconfig %s get nodes\n", filepath.Join(c.BinDir, "kubectl"), kubeconfig)
	fmt.Println("Press Ctrl-C to stop.")
	<-ctx.Done()
	return nil
}

// copyFile copies the kubeconfig, which holds the admin token, owner-only.
func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return fmt.Errorf("copy kubeconfig: %w", err)
	}
	if err := os.WriteFile(to, data, 0o600); err != nil {
		return fmt.Errorf("copy kubeconfig: %w", err)
	}
	return nil
}
