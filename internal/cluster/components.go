package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
)

// controllers are the kube-controller-manager controllers the cluster runs:
// enough for Deployments, StatefulSets and DaemonSets to roll out, for Jobs
// to run their pods (kwok completes them), for deletes to cascade and for
// evictions to honour PodDisruptionBudgets. No
// cronjob-controller: CronJobs run only when a test creates their Job. Names
// end in -controller from Kubernetes 1.33 on.
var controllers = []string{
	"deployment-controller",
	"replicaset-controller",
	"statefulset-controller",
	"daemonset-controller",
	"job-controller",
	"garbage-collector-controller",
	"namespace-controller",
	"disruption-controller", // PodDisruptionBudgets' status, which evictions read
}

// kwokNodeAnnotation marks the Nodes kwok manages (and fakes a kubelet for).
const kwokNodeAnnotation = "kwok.x-k8s.io/node"

// newProcess describes a component whose binary is in the bin dir and whose
// log goes to <LogDir>/<name>.log.
func (c *Cluster) newProcess(name string, args ...string) *Process {
	return &Process{
		Name:    name,
		Path:    filepath.Join(c.BinDir, name),
		Args:    args,
		LogPath: filepath.Join(c.LogDir, name+".log"),
	}
}

// launch starts p and records it for Stop.
func (c *Cluster) launch(ctx context.Context, p *Process) error {
	logr.FromContextOrDiscard(ctx).Info("Starting component", "component", p.Name, "log", p.LogPath)
	if err := p.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	c.add(p)
	return nil
}

// await waits for a started component to be ready and logs how long that took.
func await(ctx context.Context, p *Process, began time.Time, ready func(context.Context) error) error {
	if err := p.WaitReady(ctx, componentTimeout, ready); err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	logr.FromContextOrDiscard(ctx).Info("Component ready", "component", p.Name,
		"duration", time.Since(began).Round(time.Millisecond).String())
	return nil
}

// startAPIServer starts etcd, then kube-apiserver, and writes the admin
// kubeconfig.
func (c *Cluster) startAPIServer(ctx context.Context) error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	began := time.Now()
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	etcd := c.newProcess("etcd",
		"--data-dir="+filepath.Join(c.dir, "etcd"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		// Port 0: no other etcd member will ever dial it.
		"--listen-peer-urls=http://127.0.0.1:0",
		// The data is thrown away at Stop; fsync only slows large benchmarks.
		"--unsafe-no-fsync",
		"--log-level=warn",
	)
	if err := c.launch(ctx, etcd); err != nil {
		return err
	}
	if err := await(ctx, etcd, began, httpReady(http.DefaultClient, etcdURL+"/health", "")); err != nil {
		return err
	}

	c.APIServerURL = "https://127.0.0.1:" + strconv.Itoa(ports[1])
	cr := c.creds
	c.apiserver = c.newProcess("kube-apiserver",
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(ports[1]),
		"--cert-dir="+filepath.Join(c.dir, "apiserver"),
		"--tls-cert-file="+cr.certFile,
		"--tls-private-key-file="+cr.keyFile,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+cr.saPubFile,
		"--service-account-signing-key-file="+cr.saKeyFile,
		"--token-auth-file="+cr.tokenFile,
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		// ServiceAccount: no serviceaccount controller runs, so Pods would be
		// refused for want of a default ServiceAccount. TaintNodesByCondition:
		// it taints every new Node not-ready, and without the node-lifecycle
		// controller nothing would take the taint off.
		"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
		// The "kubernetes" Service would get 127.0.0.1 as its endpoint, which
		// validation rejects; nothing here needs that Service.
		"--endpoint-reconciler-type=none",
		// Without it, SIGTERM waits out --request-timeout (60 s) for the
		// open watches of the controllers to end; with it, they are closed.
		"--shutdown-watch-termination-grace-period=2s",
	)
	if c.AuditLogPath != "" {
		audit, err := c.auditArgs()
		if err != nil {
			return err
		}
		c.apiserver.Args = append(c.apiserver.Args, audit...)
	}
	began = time.Now()
	if err := c.launch(ctx, c.apiserver); err != nil {
		return err
	}
	if err := await(ctx, c.apiserver, began, c.apiServerReady); err != nil {
		return err
	}
	c.Kubeconfig = filepath.Join(c.dir, "kubeconfig")
	return cr.writeKubeconfig(c.Kubeconfig, c.APIServerURL, adminUser, cr.adminToken)
}

// apiServerReady checks /readyz and that the default namespace, which
// kube-apiserver makes shortly after it starts, exists.
func (c *Cluster) apiServerReady(ctx context.Context) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.creds.caData)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections()
	for _, path := range []string{"/readyz", "/api/v1/namespaces/default"} {
		if err := httpReady(client, c.APIServerURL+path, c.creds.adminToken)(ctx); err != nil {
			return err
		}
	}
	return nil
}

// startWorkers starts kube-controller-manager, kube-scheduler and kwok
// together, waits for each to be healthy, then creates the Nodes and waits
// until they are Ready.
func (c *Cluster) startWorkers(ctx context.Context, opts Options) error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	stages, err := filepath.Glob(filepath.Join(c.BinDir, "kwok-stages", "*.yaml"))
	if err != nil || len(stages) == 0 {
		return fmt.Errorf("start kwok: no stage configs in %s", filepath.Join(c.BinDir, "kwok-stages"))
	}
	if stages, err = stageConfigs(stages, c.dir); err != nil {
		return err
	}
	kubeconfig := "--kubeconfig=" + c.Kubeconfig
	kcm := c.newProcess("kube-controller-manager", kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(ports[0]),
		"--service-account-private-key-file="+c.creds.saKeyFile,
		"--controllers="+strings.Join(controllers, ","),
		// The default 20 requests/s makes a 10,000-Pod benchmark crawl.
		"--kube-api-qps=500",
		"--kube-api-burst=1000",
	)
	scheduler := c.newProcess("kube-scheduler", kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(ports[1]),
		// The default 50 requests/s binds 10,000 Pods in minutes.
		"--kube-api-qps=500",
		"--kube-api-burst=1000",
	)
	kwokAddr := "127.0.0.1:" + strconv.Itoa(ports[2])
	kwokArgs := []string{kubeconfig,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=fake",
		// Pod IPs: the default 10.0.0.0/24 overlaps the Service range.
		"--cidr=10.128.0.0/16",
		"--server-address=" + kwokAddr,
	}
	for _, s := range stages {
		kwokArgs = append(kwokArgs, "--config="+s)
	}
	kwok := c.newProcess("kwok", kwokArgs...)

	began := time.Now()
	for _, p := range []*Process{kcm, scheduler, kwok} {
		if err := c.launch(ctx, p); err != nil {
			return err
		}
	}
	// Their own serving certificates are self-signed and unknown to us.
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer insecure.CloseIdleConnections()
	checks := map[*Process]string{
		kcm:       "https://127.0.0.1:" + strconv.Itoa(ports[0]) + "/healthz",
		scheduler: "https://127.0.0.1:" + strconv.Itoa(ports[1]) + "/healthz",
		kwok:      "http://" + kwokAddr + "/healthz",
	}
	for _, p := range []*Process{kcm, scheduler, kwok} {
		if err := await(ctx, p, began, httpReady(insecure, checks[p], "")); err != nil {
			return err
		}
	}
	return c.startNodes(ctx, kwok, opts)
}

// httpReady returns a check that GETs url and wants 200 OK.
func httpReady(client *http.Client, url, token string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
		}
		return nil
	}
}

// checkBinaries reports which of the binaries Start needs are missing.
func checkBinaries(dir string, apiServerOnly bool) error {
	names := []string{"etcd", "kube-apiserver"}
	if !apiServerOnly {
		names = append(names, "kube-controller-manager", "kube-scheduler", "kwok")
	}
	var missing []string
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing in %s: %s", dir, strings.Join(missing, ", "))
	}
	return nil
}
