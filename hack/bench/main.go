// Command bench measures a controller that restarts workloads when the
// ConfigMaps or Secrets they use change: watcher, or any other, since it
// only observes the workloads through the API.
//
// It starts a local control plane (etcd and kube-apiserver, with an audit
// log), creates the workloads and configs, starts the controller as a child
// process with a kubeconfig of its own (user bench-controller), waits until
// it is ready and has stopped writing, then changes configs at a steady
// rate. It reports the controller's start-up time, memory and CPU, the
// latency from each config write to the workload's pod template change,
// next to a floor (the same write, then the benchmark changing a template
// itself), the controller's API requests by verb, and whether every change
// restarted its workloads exactly once. Missed or doubled restarts make it
// exit with 1, after the table.
//
//	go run ./hack/bench --watcher bin/watcher --workloads 10000 --size 16384
//	go run ./hack/bench --watcher bin/watcher --shared 20 --replicas 3 --pdb --strategy evict
//	go run ./hack/bench --watcher bin/watcher --blocked 1000 --after 10m --window 1m
//	go run ./hack/bench --watcher bin/watcher --pinned --workloads 200 --changes 200
//	go run ./hack/bench --controller-cmd '/path/to/other --health={healthPort}' \
//		--ready-url http://127.0.0.1:{healthPort}/ready
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// options are the benchmark's settings, one flag each.
type options struct {
	Scenario

	Watcher       string
	ControllerCmd string
	ReadyURL      string
	BinDir        string
	OutDir        string
	JSONPath      string

	// Shared, when set, runs the shared-ConfigMap scenario instead (see
	// waves.go) with this many Deployments of Replicas pods each, and a
	// PodDisruptionBudget each with PDB; ReadyDelay is how long their pods
	// take to become Ready. Strategy is watcher's --restart-strategy.
	Shared     int
	Replicas   int
	PDB        bool
	ReadyDelay time.Duration
	Strategy   string
	// Blocked, when set, runs the blocked-eviction scenario instead (see
	// blocked.go): this many evict Deployments a PodDisruptionBudget of
	// maxUnavailable 0 blocks; the controller's requests are counted for
	// Window, After the change, and RestartedAfter a restart of it.
	// RolloutTimeout is watcher's --rollout-timeout (empty: its default).
	Blocked                       int
	After, RestartedAfter, Window time.Duration
	RolloutTimeout                string
	// InstallProbe, with Shared, measures the writes of adoption with the
	// record in each place it could live, instead of running a controller
	// (probe.go).
	InstallProbe bool
	// Pinned, when set, runs the pinned scenario instead (see pinned.go):
	// the same restarts of Workloads pinned and Workloads unpinned
	// Deployments, side by side, watcher with --pinning.
	Pinned bool

	ReadyTimeout  time.Duration
	SettleQuiet   time.Duration
	SettleTimeout time.Duration
	Idle          time.Duration
	Drain         time.Duration
}

// bindFlags defines a flag for each option, with its default.
func (o *options) bindFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.Workloads, "workloads", 1000, "Deployments that use configs (replicas: 0)")
	fs.IntVar(&o.Configs, "configs", 0, "Secrets and/or ConfigMaps the workloads use; 0: as many as --workloads")
	fs.StringVar(&o.Kind, "kind", kindSecret, "kind of the configs: secret, configmap or mixed")
	fs.IntVar(&o.Size, "size", 16384, "bytes of data per config")
	fs.IntVar(&o.RefsPerWorkload, "refs-per-workload", 1, "configs each workload uses (through envFrom, a volume or a keyRef in turn)")
	fs.IntVar(&o.Changes, "changes", 200, "config changes the controller should react to (as many floor changes are made too)")
	fs.Float64Var(&o.Rate, "rate", 20, "controller changes per second (floor changes come in between)")
	fs.IntVar(&o.Policies, "policies", 0, "ReloadPolicies to create in the workloads' namespace, selecting none of them (the many-policies scenario; compare its CPU per change with a run without)")
	fs.IntVar(&o.PolicyTargets, "policy-targets", 100, "targets by selector of each of --policies")

	fs.StringVar(&o.Watcher, "watcher", "", "watcher binary, for the default --controller-cmd")
	fs.StringVar(&o.ControllerCmd, "controller-cmd", "",
		"controller command line, split on spaces (no shell); {healthPort} and {kubeconfig} are replaced; "+
			"KUBECONFIG is set too. Default: <--watcher> "+defaultWatcherArgs+"; outside the shared scenario also"+apiServerOnlyArgs+
			" (no deployment controller runs, so no rollout ever finishes and watcher's waves would hold every restart after the tenth): "+
			"give it too when measuring watcher through --controller-cmd")
	fs.StringVar(&o.ReadyURL, "ready-url", "http://127.0.0.1:{healthPort}/readyz", "URL that answers 200 once the controller is ready")
	fs.StringVar(&o.BinDir, "bin-dir", "", "control-plane binaries; empty: built or found by hack/controlplane-bins.sh")
	fs.StringVar(&o.OutDir, "out", "", "folder for the controller log, the audit log and result.json; empty: a new temporary folder")
	fs.StringVar(&o.JSONPath, "json", "", "also write the result as JSON to this file")

	fs.IntVar(&o.Shared, "shared", 0, "run the shared-ConfigMap scenario instead: this many Deployments of one replica use one ConfigMap, changed once (the whole control plane runs)")
	fs.IntVar(&o.Replicas, "replicas", 1, "with --shared: replicas of each Deployment")
	fs.BoolVar(&o.PDB, "pdb", false, "with --shared: a PodDisruptionBudget of maxUnavailable 1 for each Deployment")
	fs.IntVar(&o.Blocked, "blocked", 0, "run the blocked-eviction scenario instead: this many Deployments of one replica, restart strategy evict, each with a PodDisruptionBudget of maxUnavailable 0, use one ConfigMap, changed once (the whole control plane runs)")
	fs.DurationVar(&o.After, "after", 10*time.Minute, "with --blocked: count the leader's requests from this long after the change")
	fs.DurationVar(&o.RestartedAfter, "restarted-after", time.Minute, "with --blocked: count the restarted leader's requests from this long after its start")
	fs.DurationVar(&o.Window, "window", time.Minute, "with --blocked: how long each count lasts")
	fs.StringVar(&o.RolloutTimeout, "rollout-timeout", "", "with --blocked: watcher's --rollout-timeout; empty: its default")
	fs.BoolVar(&o.InstallProbe, "install-probe", false, "with --shared: no controller; measure the writes at install with the record in each place it could live (a label, the ReplicaSet, ConfigMaps of watcher's own, the workload's annotation)")
	fs.BoolVar(&o.Pinned, "pinned", false, "run the pinned scenario instead: --workloads unpinned and as many pinned Deployments (watcher.dev/pin: \"true\"), each reading a ConfigMap and a Secret of --size bytes; "+
		"--changes ConfigMaps of each set changed at --rate, unpinned first; the chart's MutatingAdmissionPolicy installed, watcher with --pinning (the whole control plane runs)")
	fs.DurationVar(&o.ReadyDelay, "ready-delay", 2*time.Second, "with --shared: how long pods take to become Ready")
	fs.StringVar(&o.Strategy, "strategy", "", "watcher's --restart-strategy (annotation, env, restarted-at, evict); empty: watcher's default. Only with --watcher")
	fs.DurationVar(&o.ReadyTimeout, "ready-timeout", 5*time.Minute, "longest wait for the controller to be ready")
	fs.DurationVar(&o.SettleQuiet, "settle-quiet", 2*time.Second,
		"the controller has settled once it made no write request for this long; also the wait for late restarts at the end")
	fs.DurationVar(&o.SettleTimeout, "settle-timeout", 10*time.Minute, "longest wait for the controller to settle")
	fs.DurationVar(&o.Idle, "idle", 5*time.Second, "idle period after settling, to measure idle CPU and RSS")
	fs.DurationVar(&o.Drain, "drain", 30*time.Second, "longest wait after the last change for every restart to be seen")
}

// validate completes the defaults that depend on other options and checks
// the options.
func (o *options) validate() error {
	if o.Configs == 0 {
		o.Configs = o.Workloads
	}
	var errs []error
	if err := o.Scenario.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.Watcher == "" && o.ControllerCmd == "" && !o.InstallProbe {
		errs = append(errs, errors.New("give --watcher or --controller-cmd"))
	}
	if o.Strategy != "" && o.ControllerCmd != "" {
		errs = append(errs, errors.New("--strategy is watcher's: give it in --controller-cmd instead"))
	}
	if o.Shared < 0 || o.Replicas < 1 {
		errs = append(errs, errors.New("--shared must not be negative, --replicas must be at least 1"))
	}
	if o.Blocked > 0 {
		if o.Shared > 0 || o.InstallProbe || o.Window <= 0 || (o.Strategy != "" && o.Strategy != "evict") {
			errs = append(errs, errors.New("--blocked goes with neither --shared nor --install-probe nor a --strategy other than evict, and needs a --window"))
		}
		o.Shared, o.Replicas, o.PDB, o.Strategy = o.Blocked, 1, true, "evict"
	}
	if o.Pinned && (o.Shared > 0 || o.Blocked > 0 || o.InstallProbe || o.Changes > o.Workloads || o.Policies > 0) {
		errs = append(errs, errors.New("--pinned goes with neither --shared, --blocked, --install-probe nor --policies, and needs --changes of at most --workloads"))
	}
	if o.Shared == 0 && (o.Replicas != 1 || o.PDB || o.InstallProbe) {
		errs = append(errs, errors.New("--replicas, --pdb and --install-probe go with --shared"))
	}
	return errors.Join(errs...)
}

func main() {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	o.bindFlags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	if err := o.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	switch {
	case o.InstallProbe:
		r, err := runProbe(ctx, o, newProgress(os.Stderr))
		stop()
		finish(r, err, o.JSONPath, func(w io.Writer) error { return writeProbe(w, r) })
		return
	case o.Pinned:
		r, err := runPinned(ctx, o, newProgress(os.Stderr))
		stop()
		finish(r, err, o.JSONPath, func(w io.Writer) error { return writePinned(w, r) })
		if !r.ok() {
			fmt.Fprintln(os.Stderr, "bench: a restart missed or doubled, or a pinned restart without its snapshots handed to a ReplicaSet")
			os.Exit(1)
		}
		return
	case o.Blocked > 0:
		r, err := runBlocked(ctx, o, newProgress(os.Stderr))
		stop()
		finish(r, err, o.JSONPath, func(w io.Writer) error { return writeBlocked(w, r) })
		return
	case o.Shared > 0:
		r, err := runWaves(ctx, o, newProgress(os.Stderr))
		stop()
		finish(r, err, o.JSONPath, func(w io.Writer) error { return writeWaves(w, r) })
		return
	}
	r, err := run(ctx, o, newProgress(os.Stderr))
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if err := output(r, o.JSONPath); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if !r.Correctness.OK() {
		os.Exit(1)
	}
}

// finish prints a scenario's result r with write and writes it as JSON to
// jsonPath, if given; it exits on err or on a failure to.
func finish(r any, err error, jsonPath string, write func(io.Writer) error) {
	if err == nil {
		err = write(os.Stdout)
	}
	if err == nil && jsonPath != "" {
		err = writeJSON(r, jsonPath)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// output prints the table and writes the JSON to the run's folder and to
// jsonPath, if given.
func output(r *report, jsonPath string) error {
	if err := r.writeTable(os.Stdout); err != nil {
		return fmt.Errorf("print table: %w", err)
	}
	if err := writeJSON(r, filepath.Join(r.OutDir, "result.json")); err != nil {
		return err
	}
	if jsonPath != "" {
		return writeJSON(r, jsonPath)
	}
	return nil
}

// writeJSON writes r as indented JSON to path.
func writeJSON(r any, path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("marshal result: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	return nil
}
