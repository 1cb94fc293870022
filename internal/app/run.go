package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/watcher-dev/watcher/internal/controller"
	"github.com/watcher-dev/watcher/internal/csi"
	"github.com/watcher-dev/watcher/internal/evict"
	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/policy"
	"github.com/watcher-dev/watcher/internal/resolve"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/sealed"
	"github.com/watcher-dev/watcher/internal/served"
	"github.com/watcher-dev/watcher/internal/settings"
	"github.com/watcher-dev/watcher/internal/store"
)

// Run runs watcher with the given options until ctx is done.
func Run(ctx context.Context, cfg *rest.Config, o *options.Options, log logr.Logger) error {
	key, err := loadKey(ctx, cfg, o)
	if err != nil {
		return err
	}
	hasher := hash.NewHasher(key)
	guard, err := newGuard(cfg, o, key, log)
	if err != nil {
		return err
	}
	// The store's index and the reconciler find references alike, and as
	// the graph and explain commands do.
	policies := policy.NewIndex()
	ignoreJobsUnlessAllowed(ctx, cfg, o, log) // jobs.go
	decide := o.Settings
	resolver := decide.Resolver(policies)
	st, err := newStore(cfg, o, hasher, resolver, policy.References{Index: policies}.Annotate, log.WithName("store"))
	if err != nil {
		return err
	}
	locker, err := newLocker(ctx, o, hasher.ID(), log)
	if err != nil {
		return err
	}
	if c, ok := locker.(io.Closer); ok {
		defer c.Close()
	}
	strategy, ok := restart.ByName(o.RestartStrategy)
	if !ok {
		return fmt.Errorf("unknown restart strategy %q", o.RestartStrategy)
	}
	alerts, alertRunnables, err := newAlerts(cfg, o, log)
	if err != nil {
		return err
	}
	sealedSecrets, err := sealedOptions(cfg, o, hasher)
	if err != nil {
		return err
	}
	csiOpts, err := csiOptions(cfg, o, hasher)
	if err != nil {
		return err
	}
	lease := o.Lock == options.LockLease
	// One watch of the CRDs says when the optional APIs are served.
	crds, err := served.New(cfg, log.WithName("served"))
	if err != nil {
		return err
	}
	pw, err := policy.NewWatcher(cfg, policies, st, o.Namespaces, log.WithName("policies"))
	if err != nil {
		return err
	}
	pw.Served = crds
	status, err := policy.NewStatusWriter(cfg, pw, lease, log.WithName("policy-status"))
	if err != nil {
		return err
	}
	// Maintenance windows are the first gate of the hold seam.
	guards := guardConfig(o)
	guards.Sign = func(b []byte) string { return hasher.MAC(b) }
	guards.Gates = append(guards.Gates, policy.WindowGate{Index: policies, Store: st, Status: status})
	reloader := o.ReloaderAddr != "0"
	metricsAddr, err := ownAddr(o.MetricsAddr, "metrics", reloader, log)
	if err != nil {
		return err
	}
	healthAddr, err := ownAddr(o.HealthAddr, "health", reloader, log)
	if err != nil {
		return err
	}
	if o.MetricsByNamespace {
		metrics.CountByNamespace()
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Logger:                        log,
		Metrics:                       metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:        healthAddr,
		PprofBindAddress:              o.PprofAddr,
		LeaderElection:                lease,
		LeaderElectionID:              o.Lease.Name,
		LeaderElectionNamespace:       o.OwnNamespace(),
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &o.Lease.Duration,
		RenewDeadline:                 &o.Lease.RenewDeadline,
		RetryPeriod:                   &o.Lease.RetryPeriod,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	// The guards know every optional kind once each was looked up in
	// discovery (served.Kinds.Checked).
	var kinds *served.Kinds // set below, before the manager starts
	if guards.Known == nil {
		guards.Known = func() bool { return kinds != nil && kinds.Checked(nil) == nil }
	}
	if csiOpts != nil {
		csiOpts.Log = log.WithName("csi")
	}
	var r *controller.Reconciler // set below, before the manager starts
	follower := producers(sealedSecrets.Dynamic, mgr.GetRESTMapper(), st, o, &r, log.WithName("producers"))
	guards.Producers = follower
	maker, owners, err := newPinning(o, mgr, hasher, log)
	if err != nil {
		return err
	}
	if maker != nil {
		status.Pinning = maker.Installed
		if err := mgr.Add(owners); err != nil {
			return fmt.Errorf("set up manager: %w", err)
		}
	}
	r = controller.New(st, mgr.GetClient(), mgr.GetAPIReader(), mgr.GetEventRecorder("watcher"), controller.Config{
		Settings:           decide,
		Coalesce:           o.Coalesce,
		CoalesceMax:        o.CoalesceMax,
		CronJobTrigger:     o.CronJobTrigger,
		DryRun:             o.DryRun,
		CacheSyncTimeout:   o.CacheSyncTimeout,
		Workers:            o.Workers,
		Strategy:           strategy,
		Hasher:             hasher,
		Key:                guard,
		NeedLeaderElection: lease,
		Locker:             locker,
		Resolver:           resolver,
		Guards:             withAlerts(guards, alerts),
		Alerts:             alerts,
		CSI:                csiOpts,
		Snapshots:          maker,
		SnapshotView:       snapshotView(owners),
		Policies:           &controller.Policies{Index: policies, Watcher: pw, Status: status},
		Namespace:          o.OwnNamespace(),
		Own: []object.Ref{
			{Kind: "ConfigMap", Namespace: o.OwnNamespace(), Name: settings.ConfigMapName(o.Lease.Name)},
			{Kind: "Secret", Namespace: o.OwnNamespace(), Name: o.HashKeySecret},
		},
	})
	// The optional APIs are watched only while they are served: the
	// optional workload kinds and CSI (sources of the controller), and
	// SealedSecrets, reported by the replica that claims each change.
	apis, err := controller.Setup(mgr, r)
	if err != nil {
		return err
	}
	if so := sealedSecrets; so != nil {
		so.Recorder = r.Recorder
		so.Log = log.WithName("sealedsecrets")
		so.Claim = claimer(func() bool { return isClosed(mgr.Elected()) }, locker, so.Log)
		apis = append(apis, sealed.NewWatcher(*so))
	}
	apis = append(apis, follower.APIs()...)
	kinds = served.NewKinds(apis, crds, log.WithName("kinds"))
	for _, rn := range helpers(r.Helpers(), lease, log) {
		if err := mgr.Add(rn); err != nil {
			return fmt.Errorf("set up manager: %w", err)
		}
	}
	direct, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	publisher := &settingsPublisher{c: direct, namespace: o.OwnNamespace(), name: settings.ConfigMapName(o.Lease.Name),
		settings: decide, log: log.WithName("settings")}
	monitor := &lockMonitor{locker: locker, interval: 2 * time.Second, log: log}
	if err := errors.Join(
		mgr.Add(st),
		mgr.Add(crds),
		mgr.Add(kinds),
		mgr.Add(pw),
		mgr.Add(status),
		mgr.Add(guard),
		mgr.Add(monitor),
		mgr.Add(publisher),
		mgr.Add(leaderGauge{needLeader: lease}),
		mgr.Add(&reporter{store: st, opts: o, log: log}),
		mgr.AddHealthzCheck("ping", healthz.Ping),
		mgr.AddReadyzCheck("caches", func(*http.Request) error {
			if !st.HasSynced() {
				return errors.New("caches not synced yet")
			}
			return nil
		}),
		mgr.AddReadyzCheck("lock", monitor.Check),
		mgr.AddReadyzCheck("optional-apis", kinds.Checked),
	); err != nil {
		return fmt.Errorf("set up manager: %w", err)
	}
	if reloader {
		if err := mgr.Add(reloaderServer{addr: o.ReloaderAddr, log: log.WithName("reloader")}); err != nil {
			return fmt.Errorf("set up manager: %w", err)
		}
	}
	for _, r := range alertRunnables {
		if err := mgr.Add(r); err != nil {
			return fmt.Errorf("set up manager: %w", err)
		}
	}
	log.Info("Starting watcher", "lock", o.Lock, "namespaces", o.Namespaces, "metricsAddr", metricsAddr, "healthAddr", healthAddr, "reloaderAddr", o.ReloaderAddr, "dryRun", o.DryRun)
	return mgr.Start(ctx)
}

// newStore creates the informers of ConfigMaps, Secrets and workloads. They
// read with protobuf, which decodes faster and with less garbage than JSON.
func newStore(cfg *rest.Config, o *options.Options, h *hash.Hasher, r *resolve.Resolver, annotate func(*metav1.PartialObjectMetadata), log logr.Logger) (*store.Store, error) {
	// Custom resources are served as JSON only.
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	return store.New(cs, store.Options{
		Namespaces:                o.Namespaces,
		WorkloadSelector:          o.WorkloadSelector,
		IgnoredKinds:              o.IgnoreWorkloadKinds,
		ConfigSelector:            o.ConfigSelector,
		NamespaceSelector:         o.NamespaceSelector,
		IgnoreConfigMapNamespaces: o.IgnoreConfigMapNamespaces,
		IgnoreSecretNamespaces:    o.IgnoreSecretNamespaces,
		Hasher:                    h,
		Log:                       log,
		Refs:                      r.Refs,
		Wildcards:                 r.Wildcards,
		Annotate:                  annotate,
		Dynamic:                   dyn,
		Keys:                      o.AnnotationKeys,
		WorkloadAnnotations:       append([]string{o.Annotation, plan.RecordAnnotation, plan.HashKeyAnnotation, plan.VersionAnnotation, restart.StrategyAnnotation, guard.PriorityAnnotation, guard.ReleaseAnnotation, guard.StateAnnotation, guard.PendingAnnotation, evict.DoneAnnotation}, optin.WorkloadKeys...),
		ConfigAnnotations:         append([]string{o.Annotation, guard.ReleaseAnnotation, pin.Annotation, pin.CertificateName}, optin.ConfigKeys...),
	})
}

// pickPort turns port 0 into a free port, so that the log can say where
// /metrics and /readyz are (controller-runtime logs the address it was
// given). "0" (disabled) is returned as it is.
func pickPort(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if addr == "0" || err != nil || port != "0" {
		return addr, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("listen on %s: %w", addr, err)
	}
	defer l.Close()
	return net.JoinHostPort(host, strconv.Itoa(l.Addr().(*net.TCPAddr).Port)), nil
}

// loadKey reads (or creates) the hash key in watcher's own namespace.
func loadKey(ctx context.Context, cfg *rest.Config, o *options.Options) ([]byte, error) {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	key, err := hash.LoadKey(ctx, c, o.OwnNamespace(), o.HashKeySecret)
	if err != nil {
		return nil, fmt.Errorf("%w (watcher needs get and create on Secrets in its namespace %s)", err, o.OwnNamespace())
	}
	return key, nil
}

// newGuard returns the guard that keeps this replica's hash key in line
// with the key Secret.
func newGuard(cfg *rest.Config, o *options.Options, key []byte, log logr.Logger) (*hash.Guard, error) {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	return hash.NewGuard(cs, c, o.OwnNamespace(), o.HashKeySecret, key, log.WithName("hash-key")), nil
}

// csiOptions are the settings of the watch of SecretProviderClassPodStatuses
// (package csi); nil unless --csi.
func csiOptions(cfg *rest.Config, o *options.Options, hasher *hash.Hasher) (*csi.Options, error) {
	if !o.CSI {
		return nil, nil
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	return &csi.Options{Dynamic: dyn, Meta: meta, Hasher: hasher, Namespaces: o.Namespaces, IgnoreNamespaces: o.IgnoreSecretNamespaces}, nil
}
