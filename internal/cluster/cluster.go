// Package cluster starts a local Kubernetes control plane for tests,
// benchmarks and demos: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok, all on loopback ports chosen at run time, built
// from Go modules by hack/controlplane-bins.sh.
//
// kwok fakes the kubelets of its Nodes, so Pods bound to them go Running and
// Ready without any container runtime, Deployments, StatefulSets and
// DaemonSets complete their rollouts, and the Pods of Jobs run to completion.
//
// What Start runs, by Options (startup times measured warm on 2 cores):
//
//	| Options             | runs                                      | Nodes | starts in |
//	| ------------------- | ----------------------------------------- | ----- | --------- |
//	| zero value          | etcd, kube-apiserver, controller-manager, | 1     | ~3.5 s    |
//	|                     | scheduler, kwok                           |       |           |
//	| Nodes: 10           | the same                                  | 10    | ~3.5 s    |
//	| APIServerOnly: true | etcd, kube-apiserver                      | none  | ~2.5 s    |
//
// Each Node takes PodsPerNode Pods (default 1000): 10 Nodes hold the
// 10,000 Pods of a large benchmark, which kwok brings to Ready in about a
// minute.
//
// Every process runs in its own process group, writes its log to a file
// under Cluster.LogDir and, on Linux, is killed by the kernel when the
// process that started it dies, so an interrupted test leaves nothing
// running.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
)

// Options says which components Start runs and how it finds them.
type Options struct {
	// BinDir holds etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler, kwok and kwok-stages/. Empty means: run
	// hack/controlplane-bins.sh (found by walking up from the working
	// directory to go.mod), which builds what is missing, and use the folder
	// it prints.
	BinDir string

	// APIServerOnly starts only etcd and kube-apiserver: enough for
	// integration tests of a controller, lighter and a second faster.
	APIServerOnly bool

	// Nodes is the number of kwok Nodes to create; 0 means 1.
	Nodes int

	// PodsPerNode is the allocatable pod count of each Node; 0 means 1000.
	// A benchmark of 10,000 Pods needs Nodes*PodsPerNode >= 10,000.
	PodsPerNode int

	// Users are extra token users, for RBAC tests or for a controller
	// whose requests should be told apart; see Cluster.UserRESTConfig. The
	// admin user is always there.
	Users []User

	// AuditLog makes kube-apiserver write an audit log to
	// Cluster.AuditLogPath: one JSON line per request of the Users (not of
	// the admin user nor of kube-apiserver itself) at level Metadata, so a
	// benchmark can count a controller's requests by verb.
	AuditLog bool
	// AuditAdmin also logs the admin user's requests: those of the
	// cluster's own components (kube-controller-manager, the scheduler,
	// kwok), so that a benchmark can count their reactions to a
	// controller's writes. The driver's own requests are then logged too.
	AuditAdmin bool
}

// User is a token-authenticated user with no permissions of its own,
// unless a group grants them (system:masters may do anything).
type User struct {
	// Name is the user name the API server sees; it must not hold commas
	// or quotes.
	Name string
	// Groups are the user's groups, besides system:authenticated.
	Groups []string
}

// Cluster is a running control plane. Stop it when done.
type Cluster struct {
	// APIServerURL is the kube-apiserver's https URL.
	APIServerURL string
	// Kubeconfig is the path of an admin (system:masters) kubeconfig file.
	Kubeconfig string
	// LogDir holds one log file per component, named after it.
	LogDir string
	// BinDir is the folder the binaries came from; it holds kubectl too.
	BinDir string
	// AuditLogPath is the audit log in LogDir with Options.AuditLog, else
	// empty.
	AuditLogPath string

	auditAdmin bool
	dir        string
	creds      *credentials

	mu        sync.Mutex
	procs     []*Process // in start order; Stop goes in reverse
	apiserver *Process
	stopped   bool
}

const (
	// componentTimeout bounds the wait for one component to become ready.
	componentTimeout = 60 * time.Second
	// stopGrace is how long a component has to exit after SIGTERM.
	stopGrace = 10 * time.Second
)

// Start starts a control plane as opts says and returns once it is ready to
// use: /readyz answers ok, the default namespace exists and every Node is
// Ready and untainted. Progress goes to the logr.Logger in ctx, if any. On
// error, everything already started is stopped again. ctx bounds only the
// start: the cluster runs until Stop.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	log := logr.FromContextOrDiscard(ctx)
	began := time.Now()
	opts = opts.withDefaults()
	binDir, err := findBinDir(ctx, opts.BinDir)
	if err != nil {
		return nil, err
	}
	if err := checkBinaries(binDir, opts.APIServerOnly); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "watcher-cluster-")
	if err != nil {
		return nil, fmt.Errorf("create cluster dir: %w", err)
	}
	c := &Cluster{BinDir: binDir, dir: dir, LogDir: filepath.Join(dir, "logs")}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
		}
	}()
	if err := os.Mkdir(c.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("create log dir: %w", err)
	}
	if c.creds, err = newCredentials(filepath.Join(dir, "pki"), opts.Users); err != nil {
		return nil, err
	}
	if opts.AuditLog {
		c.AuditLogPath = filepath.Join(c.LogDir, auditLogName)
		c.auditAdmin = opts.AuditAdmin
	}
	if err := c.startAPIServer(ctx); err != nil {
		return nil, err
	}
	if !opts.APIServerOnly {
		if err := c.startWorkers(ctx, opts); err != nil {
			return nil, err
		}
	}
	log.Info("Cluster ready", "apiServer", c.APIServerURL, "kubeconfig", c.Kubeconfig,
		"duration", time.Since(began).Round(time.Millisecond).String())
	return c, nil
}

func (o Options) withDefaults() Options {
	if o.Nodes <= 0 {
		o.Nodes = 1
	}
	if o.PodsPerNode <= 0 {
		o.PodsPerNode = 1000
	}
	return o
}

// RESTConfig returns a new admin (system:masters) client configuration.
func (c *Cluster) RESTConfig() *rest.Config {
	return c.creds.restConfig(c.APIServerURL, c.creds.adminToken)
}

// UserRESTConfig returns a client configuration for a user from
// Options.Users.
func (c *Cluster) UserRESTConfig(name string) (*rest.Config, error) {
	token, ok := c.creds.userTokens[name]
	if !ok {
		return nil, fmt.Errorf("user %q is not in Options.Users", name)
	}
	return c.creds.restConfig(c.APIServerURL, token), nil
}

// UserKubeconfig writes a kubeconfig file for a user from Options.Users into
// the cluster's folder and returns its path.
func (c *Cluster) UserKubeconfig(name string) (string, error) {
	token, ok := c.creds.userTokens[name]
	if !ok {
		return "", fmt.Errorf("user %q is not in Options.Users", name)
	}
	path := filepath.Join(c.dir, "kubeconfig-"+name)
	if err := c.creds.writeKubeconfig(path, c.APIServerURL, name, token); err != nil {
		return "", err
	}
	return path, nil
}

// RestartAPIServer stops kube-apiserver (SIGTERM, then SIGKILL after a
// grace period), starts it again on the same port with the same flags and
// waits until it is ready. Clients see the connection drop and come back.
func (c *Cluster) RestartAPIServer(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped || c.apiserver == nil {
		return errors.New("restart kube-apiserver: cluster is not running")
	}
	c.apiserver.Stop(stopGrace)
	if err := c.apiserver.Start(); err != nil {
		return fmt.Errorf("restart kube-apiserver: %w", err)
	}
	if err := c.apiserver.WaitReady(ctx, componentTimeout, c.apiServerReady); err != nil {
		return fmt.Errorf("restart kube-apiserver: %w", err)
	}
	return nil
}

// Stop stops every component, newest first, kills anything left in their
// process groups and removes the cluster's folder, logs included. It is
// safe to call more than once and from several goroutines.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	c.stopped = true
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].Stop(stopGrace)
	}
	if err := os.RemoveAll(c.dir); err != nil {
		return fmt.Errorf("remove cluster dir: %w", err)
	}
	return nil
}

// PIDs returns the process ids of the components by name, for tests.
func (c *Cluster) PIDs() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	pids := make(map[string]int, len(c.procs))
	for _, p := range c.procs {
		pids[p.Name] = p.Pid()
	}
	return pids
}

// add records a started process so that Stop stops it.
func (c *Cluster) add(p *Process) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.procs = append(c.procs, p)
}

// validUserName reports whether name fits in a token file's CSV field.
func validUserName(name string) bool {
	return name != "" && !strings.ContainsAny(name, ",\"\n")
}
