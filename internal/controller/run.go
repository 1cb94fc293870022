package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Run runs watcher with the given options until ctx is done.
func Run(ctx context.Context, cfg *rest.Config, o *options.Options, log logr.Logger) error {
	hasher, err := loadHasher(ctx, cfg, o)
	if err != nil {
		return err
	}
	cacheOpts, err := CacheOptions(o, hasher)
	if err != nil {
		return err
	}
	locker, err := newLocker(ctx, o, log)
	if err != nil {
		return err
	}
	lease := o.Lock == options.LockLease
	metricsAddr, err := pickPort(o.MetricsAddr)
	if err != nil {
		return err
	}
	healthAddr, err := pickPort(o.HealthAddr)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Logger:                        log,
		Cache:                         cacheOpts,
		Metrics:                       metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:        healthAddr,
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
	err = Setup(ctx, mgr, Config{
		Annotation:         o.Annotation,
		RestartOnCreate:    o.RestartOnCreate,
		Coalesce:           o.Coalesce,
		Workers:            o.Workers,
		Hasher:             hasher,
		VerifyRestarts:     o.Lock != options.LockLease,
		NeedLeaderElection: lease,
		Locker:             locker,
	})
	if err != nil {
		return err
	}
	synced := &syncedCheck{cache: mgr.GetCache()}
	monitor := &lockMonitor{locker: locker, interval: 2 * time.Second, log: log}
	if err := errors.Join(
		mgr.Add(synced),
		mgr.Add(monitor),
		mgr.Add(leaderGauge{needLeader: lease}),
		mgr.Add(&reporter{cache: mgr.GetCache(), opts: o, log: log}),
		mgr.AddHealthzCheck("ping", healthz.Ping),
		mgr.AddReadyzCheck("caches", synced.Check),
		mgr.AddReadyzCheck("lock", monitor.Check),
	); err != nil {
		return fmt.Errorf("set up manager: %w", err)
	}
	log.Info("Starting watcher", "lock", o.Lock, "namespaces", o.Namespaces, "metricsAddr", metricsAddr, "healthAddr", healthAddr)
	return mgr.Start(ctx)
}

// CacheOptions returns the informer cache settings: ConfigMaps and Secrets
// reduced to digests and filtered by namespace and label, workloads stripped
// of what watcher does not read.
func CacheOptions(o *options.Options, h *hash.Hasher) (cache.Options, error) {
	workloadSel, err := labels.Parse(o.WorkloadSelector)
	if err != nil {
		return cache.Options{}, fmt.Errorf("workload selector: %w", err)
	}
	configSel, err := labels.Parse(o.ConfigSelector)
	if err != nil {
		return cache.Options{}, fmt.Errorf("config selector: %w", err)
	}
	opts := cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.ConfigMap{}: {Transform: h.TransformConfigMap, Label: configSel, Field: notIn(o.IgnoreConfigMapNamespaces)},
		&corev1.Secret{}:    {Transform: h.TransformSecret, Label: configSel, Field: notIn(o.IgnoreSecretNamespaces)},
	}}
	for _, obj := range []client.Object{&appsv1.Deployment{}, &appsv1.StatefulSet{}, &appsv1.DaemonSet{}} {
		opts.ByObject[obj] = cache.ByObject{Transform: workload.Transform, Label: workloadSel}
	}
	if len(o.Namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range o.Namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts, nil
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

// loadHasher reads (or creates) the hash key in watcher's own namespace.
func loadHasher(ctx context.Context, cfg *rest.Config, o *options.Options) (*hash.Hasher, error) {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	key, err := hash.LoadKey(ctx, c, o.OwnNamespace(), o.HashKeySecret)
	if err != nil {
		return nil, fmt.Errorf("%w (watcher needs get and create on Secrets in its namespace %s)", err, o.OwnNamespace())
	}
	return hash.NewHasher(key), nil
}

// notIn selects objects outside the given namespaces.
func notIn(namespaces []string) fields.Selector {
	sel := make([]fields.Selector, 0, len(namespaces))
	for _, ns := range namespaces {
		sel = append(sel, fields.OneTermNotEqualSelector("metadata.namespace", ns))
	}
	return fields.AndSelectors(sel...)
}

// syncedCheck is a readiness check that passes once every informer has
// synced. It runs on every replica, leader or not.
type syncedCheck struct {
	cache  cache.Cache
	synced atomic.Bool
}

func (s *syncedCheck) Start(ctx context.Context) error {
	if s.cache.WaitForCacheSync(ctx) {
		s.synced.Store(true)
	}
	return nil
}

func (s *syncedCheck) NeedLeaderElection() bool { return false }

func (s *syncedCheck) Check(*http.Request) error {
	if !s.synced.Load() {
		return errors.New("caches not synced yet")
	}
	return nil
}

var _ manager.LeaderElectionRunnable = (*syncedCheck)(nil)
