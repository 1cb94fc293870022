package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/watcher-dev/watcher/internal/cluster"
)

// controllerUser is the user the controller under test authenticates as,
// which tells its requests apart in the audit log. It is in system:masters:
// any controller may be measured, whatever rights it needs.
const controllerUser = "bench-controller"

// defaultWatcherArgs follow --watcher in the default controller command:
// no coalescing (changes are paced anyway), no periodic state log, metrics
// on any free port, health on a port the benchmark knows.
const defaultWatcherArgs = "--coalesce=0 --print-time=0 --metrics-addr=127.0.0.1:0 " +
	"--health-addr=127.0.0.1:{healthPort} --lease-namespace=default"

// apiServerOnlyArgs follow defaultWatcherArgs in the default scenario:
// with no deployment controller, no rollout is ever done, so waves would
// hold every restart after the tenth (the shared scenario measures them).
const apiServerOnlyArgs = " --max-concurrent-rollouts=0"

// bench is the state of one run.
type bench struct {
	o       options
	log     *progress
	cluster *cluster.Cluster
	cs      kubernetes.Interface
	tw      *templateWatch
	ctrl    *controllerProcess
	r       *report
	phases  []phase
}

// run runs the benchmark: control plane, objects, controller start-up,
// idle period, changes, then the analysis. Whatever happens, the controller
// and the control plane are stopped before it returns.
func run(ctx context.Context, o options, log *progress) (_ *report, err error) {
	began := time.Now()
	outDir, err := makeOutDir(o.OutDir)
	if err != nil {
		return nil, err
	}
	b := &bench{o: o, log: log, r: &report{Scenario: o.Scenario, OutDir: outDir}}
	log.printf("logs and results go to %s", outDir)

	log.printf("starting control plane (etcd, kube-apiserver)")
	clusterLog := funcr.New(func(_, args string) { log.printf("cluster: %s", args) }, funcr.Options{})
	b.cluster, err = cluster.Start(logr.NewContext(ctx, clusterLog), cluster.Options{
		BinDir:        o.BinDir,
		APIServerOnly: true,
		AuditLog:      true,
		Users:         []cluster.User{{Name: controllerUser, Groups: []string{"system:masters"}}},
	})
	if err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	defer func() {
		log.printf("stopping control plane")
		err = errors.Join(err, b.cluster.Stop())
	}()
	if b.cs, err = benchClient(b.cluster.RESTConfig()); err != nil {
		return nil, err
	}

	created := time.Now()
	if err := createAll(ctx, b.cs, o.Scenario, log); err != nil {
		return nil, err
	}
	if err := createPolicies(ctx, b.cluster.RESTConfig(), o.Scenario, log); err != nil {
		return nil, err
	}
	b.r.Create = toSeconds(time.Since(created))
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if b.tw, err = startTemplateWatch(watchCtx, b.cs); err != nil {
		return nil, err
	}

	defer func() {
		if b.ctrl != nil {
			b.ctrl.stop()
		}
	}()
	if err := b.startUp(ctx); err != nil {
		return nil, err
	}
	if err := b.idle(ctx); err != nil {
		return nil, err
	}
	made, from, to, err := b.change(ctx)
	if err != nil {
		return nil, err
	}
	log.printf("done; stopping the controller")
	b.ctrl.stop()
	if err := b.analyse(made, from, to); err != nil {
		return nil, err
	}
	b.r.Total = toSeconds(time.Since(began))
	return b.r, nil
}

// startUp starts the controller and waits until it is ready, then until it
// has stopped writing (adopting the workloads, say).
func (b *bench) startUp(ctx context.Context) error {
	kubeconfig, err := b.cluster.UserKubeconfig(controllerUser)
	if err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	argv, readyURL, err := b.o.controllerCommand(port, kubeconfig)
	if err != nil {
		return err
	}
	b.r.ControllerCmd = strings.Join(argv, " ")
	b.log.printf("starting controller: %s", b.r.ControllerCmd)
	b.ctrl, err = startController(argv, []string{"KUBECONFIG=" + kubeconfig}, filepath.Join(b.r.OutDir, "controller.log"))
	if err != nil {
		return err
	}
	b.phases = append(b.phases, phase{Name: phaseStartup, Start: b.ctrl.started})
	toReady, err := b.ctrl.waitReady(ctx, readyURL, b.o.ReadyTimeout)
	if err != nil {
		return err
	}
	b.r.StartToReady = toSeconds(toReady)
	b.log.printf("controller ready after %.2f s; waiting until it makes no write for %s", toReady.Seconds(), b.o.SettleQuiet)
	readyAt := b.ctrl.started.Add(toReady)
	if err := waitPolicyStatus(ctx, b.cluster.RESTConfig(), b.o.Scenario, b.o.SettleTimeout, b.log); err != nil {
		return err
	}
	lastWrite, writes, settled, err := b.waitSettled(ctx, readyAt)
	if err != nil {
		return err
	}
	quietFrom := lastWrite
	if readyAt.After(quietFrom) {
		quietFrom = readyAt
	}
	b.r.StartToSettled, b.r.Settled = toSeconds(quietFrom.Sub(b.ctrl.started)), settled
	b.phases = append(b.phases, phase{Name: phaseIdle, Start: time.Now()})
	if !settled {
		b.log.printf("controller still writing after %s (%d writes); going on", b.o.SettleTimeout, writes)
	} else {
		b.log.printf("controller settled: %d writes during start-up, the last %.2f s after start", writes, b.r.StartToSettled)
	}
	return nil
}

// waitSettled follows the audit log until the controller has made no write
// request for SettleQuiet since readyAt, or for at most SettleTimeout.
// Leases and Events do not count: a leader renews its Lease every few
// seconds for as long as it runs. It
// returns the time of the last write, the number of writes, and whether
// the controller settled.
func (b *bench) waitSettled(ctx context.Context, readyAt time.Time) (time.Time, int, bool, error) {
	tail := &auditTail{path: b.cluster.AuditLogPath}
	deadline := time.Now().Add(b.o.SettleTimeout)
	var lastWrite time.Time
	writes, lastReport := 0, time.Now()
	for {
		err := tail.next(func(e auditEvent) {
			if e.User.Username == controllerUser && isWrite(e.Verb) && !e.housekeeping() {
				writes++
				if e.Received.After(lastWrite) {
					lastWrite = e.Received
				}
			}
		})
		if err != nil {
			return time.Time{}, 0, false, err
		}
		quietFrom := lastWrite
		if readyAt.After(quietFrom) {
			quietFrom = readyAt
		}
		switch {
		case time.Since(quietFrom) >= b.o.SettleQuiet:
			return lastWrite, writes, true, nil
		case time.Now().After(deadline):
			return lastWrite, writes, false, nil
		case time.Since(lastReport) >= 5*time.Second:
			b.log.printf("settling: %d writes by the controller so far, the last %.1f s ago", writes, time.Since(quietFrom).Seconds())
			lastReport = time.Now()
		}
		if err := b.ctrl.running(); err != nil {
			return time.Time{}, 0, false, err
		}
		select {
		case <-ctx.Done():
			return time.Time{}, 0, false, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// idle samples the controller, waits Idle, and samples it again.
func (b *bench) idle(ctx context.Context) error {
	before, err := readProc(b.ctrl.pid())
	if err != nil {
		return err
	}
	b.log.printf("idle for %s", b.o.Idle)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(b.o.Idle):
	}
	after, err := readProc(b.ctrl.pid())
	if err != nil {
		return err
	}
	b.r.Idle, b.r.CPUStartup = after, toSeconds(before.CPU)
	b.r.CPUIdle = (after.CPU - before.CPU).Seconds() / b.o.Idle.Seconds()
	b.log.printf("idle: RSS %s (peak %s), CPU %.2f s so far", mib(after.RSS), mib(after.Peak), after.CPU.Seconds())
	return nil
}

// change makes the changes, waits for the restarts they call for (and a
// little longer, for doubles), and samples the controller. It returns what
// it changed and the change phase's bounds.
func (b *bench) change(ctx context.Context) (made []applied, from, to time.Time, err error) {
	s := b.o.Scenario
	b.log.printf("changing %d configs at %g/s, with %d floor changes in between", s.Changes, s.Rate, s.Changes)
	from = time.Now()
	b.phases = append(b.phases, phase{Name: phaseChanges, Start: from})
	if made, err = runChanges(ctx, b.cs, s, b.tw, b.log); err != nil {
		return nil, from, to, err
	}
	b.log.printf("all changes made in %.1f s; waiting for the last restarts", time.Since(from).Seconds())
	missing, err := waitAllSeen(ctx, b.tw, made, from, b.o.Drain)
	if err != nil {
		return nil, from, to, err
	}
	if missing > 0 {
		b.log.printf("%d restarts still missing after %s", missing, b.o.Drain)
	}
	select { // late doubles
	case <-ctx.Done():
		return nil, from, to, ctx.Err()
	case <-time.After(b.o.SettleQuiet):
	}
	to = time.Now()
	b.r.Changes = toSeconds(to.Sub(from))
	if err := b.ctrl.running(); err != nil {
		return nil, from, to, err
	}
	end, err := readProc(b.ctrl.pid())
	if err != nil {
		return nil, from, to, err
	}
	b.r.End, b.r.CPUChanges = end, toSeconds(end.CPU-b.r.Idle.CPU)
	return made, from, to, nil
}

// analyse matches the changes with the template changes seen, and counts
// the controller's requests in the audit log, which it copies to OutDir.
func (b *bench) analyse(made []applied, from, to time.Time) error {
	seen, _, err := b.tw.snapshot()
	if err != nil {
		return err
	}
	out := evaluate(made, seen, from, to)
	b.r.Controller, b.r.Floor = newLatency(summarize(out.Controller)), newLatency(summarize(out.Floor))
	if b.r.Floor.P99ms > 0 {
		b.r.P99Ratio = b.r.Controller.P99ms / b.r.Floor.P99ms
	}
	b.r.Correctness = correctness{
		Expected: out.Expected, Seen: out.Seen, Missed: out.Missed, Doubled: out.Doubled,
		MissedWorkloads: out.MissedWorkloads, DoubledWorkloads: out.DoubledWorkloads,
		StartupRestarts: countWithin(seen, time.Time{}, from),
	}
	auditCopy := filepath.Join(b.r.OutDir, "audit.log")
	if err := copyFile(b.cluster.AuditLogPath, auditCopy); err != nil {
		return err
	}
	f, err := os.Open(auditCopy)
	if err != nil {
		return fmt.Errorf("open audit log: %w", err)
	}
	defer f.Close()
	if b.r.Requests, err = countAudit(f, controllerUser, b.phases, to); err != nil {
		return err
	}
	b.r.ListsAfterStartup = listsAfterStartup(b.r.Requests)
	rate, idle := idleRate(b.r.Requests, b.phases)
	b.r.IdleRequestsPerMinute, b.r.IdlePhase = rate, toSeconds(idle)
	return nil
}

// controllerCommand returns the controller's command line and ready URL,
// with {healthPort} and {kubeconfig} filled in.
func (o options) controllerCommand(healthPort int, kubeconfig string) ([]string, string, error) {
	line := o.ControllerCmd
	if line == "" {
		line = o.Watcher + " " + defaultWatcherArgs
		if o.Shared == 0 {
			line += apiServerOnlyArgs
		}
		if o.Strategy != "" {
			line += " --restart-strategy=" + o.Strategy
		}
		if o.Pinned {
			line += " --pinning"
		}
		if o.Blocked > 0 { // every restart at once; none ever finishes
			line += apiServerOnlyArgs
			if o.RolloutTimeout != "" {
				line += " --rollout-timeout=" + o.RolloutTimeout
			}
		}
	}
	fill := strings.NewReplacer("{healthPort}", strconv.Itoa(healthPort), "{kubeconfig}", kubeconfig)
	argv := strings.Fields(fill.Replace(line))
	if len(argv) == 0 {
		return nil, "", errors.New("empty --controller-cmd")
	}
	return argv, fill.Replace(o.ReadyURL), nil
}

// benchClient returns the benchmark's own client: admin, fast, protobuf.
func benchClient(cfg *rest.Config) (kubernetes.Interface, error) {
	cfg.QPS, cfg.Burst = 1000, 2000
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	return cs, nil
}

// makeOutDir creates dir, or a new temporary folder if dir is empty.
func makeOutDir(dir string) (string, error) {
	if dir == "" {
		dir, err := os.MkdirTemp("", "watcher-bench-")
		if err != nil {
			return "", fmt.Errorf("create output folder: %w", err)
		}
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create output folder: %w", err)
	}
	return filepath.Abs(dir)
}

// freePort returns a loopback TCP port that is free right now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return fmt.Errorf("copy %s: %w", from, err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return fmt.Errorf("copy %s: %w", from, err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return fmt.Errorf("copy %s: %w", from, err)
	}
	return dst.Close()
}
