// Package install tests how watcher is installed and operated: the Helm
// chart of deploy/helm/watcher with the real helm CLI (lint, template over
// several values sets, install and upgrade), the one-file manifests of
// deploy/manifests, the RBAC they grant (enough for a restart, no more), the
// restricted Pod Security Standard, the daemonless image, and the alert
// rules and dashboard, parsed by Prometheus's own parsers.
//
// It runs against a whole local control plane with a kwok Node (see
// internal/cluster), so the watcher pods of a release are scheduled and go
// Ready. kwok runs no containers: the watcher binary itself runs here as a
// process, with the token of the release's ServiceAccount and the
// environment of the release's Deployment.
//
// The helm CLI is built once from its Go module by hack/helm.sh, the
// Prometheus Operator CRDs come from its module (hack/monitoring-crds.sh);
// the binary is $WATCHER_BIN (make test sets it), else it is built.
package install

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/watcher-dev/watcher/internal/cluster"
)

var (
	ctx        = context.Background()
	kube       *cluster.Cluster
	k8s        client.Client
	helmBin    string
	kubectlBin string
	watcherBin string
	// root is the repository's root folder.
	root = filepath.Join("..", "..")
	// chart is the chart's folder.
	chart = filepath.Join(root, "deploy", "helm", "watcher")
)

const wait = 60 * time.Second

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "install: "+format+"\n", args...)
		return 1
	}
	tmp, err := os.MkdirTemp("", "watcher-install-")
	if err != nil {
		return fail("%v", err)
	}
	defer os.RemoveAll(tmp)
	if helmBin, err = script("helm.sh"); err != nil {
		return fail("build helm: %v", err)
	}
	crds, err := script("monitoring-crds.sh")
	if err != nil {
		return fail("monitoring CRDs: %v", err)
	}
	if watcherBin = os.Getenv("WATCHER_BIN"); watcherBin == "" {
		watcherBin = filepath.Join(tmp, "watcher")
		build := exec.Command("go", "build", "-o", watcherBin, "../../cmd/watcher")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fail("build watcher: %v", err)
		}
	}
	c, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	log := funcr.New(func(_, args string) { fmt.Fprintln(os.Stderr, "cluster:", args) }, funcr.Options{})
	ctrllog.SetLogger(log)
	kube, err = cluster.Start(logr.NewContext(c, log), cluster.Options{Nodes: 1})
	if err != nil {
		return fail("start cluster: %v", err)
	}
	defer kube.Stop()
	kubectlBin = filepath.Join(kube.BinDir, "kubectl")
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	if k8s, err = client.New(kube.RESTConfig(), client.Options{Scheme: scheme}); err != nil {
		return fail("%v", err)
	}
	// The chart's own CRDs (crds/) are installed by helm; the Prometheus
	// Operator's are there as in a cluster that runs it.
	if _, err := envtest.InstallCRDs(kube.RESTConfig(), envtest.CRDInstallOptions{Paths: []string{crds}}); err != nil {
		return fail("install monitoring CRDs: %v", err)
	}
	return m.Run()
}

// script runs hack/<name> and returns what it prints.
func script(name string) (string, error) {
	cmd := exec.Command(filepath.Join(root, "hack", name))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}
