package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/watcher-dev/watcher/internal/lock"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/options"
)

// newLocker returns the Locker of the lock mode. In the redis mode it checks
// Redis once: wrong credentials stop watcher (retrying cannot cure them); an
// unreachable Redis does not (watcher starts not ready, and changes wait).
// hashKeyID (hash.Hasher.ID) names the hash key in the keys of the Redis
// locks, next to the Lease namespace and name: see lock.Prefix.
func newLocker(ctx context.Context, o *options.Options, hashKeyID string, log logr.Logger) (lock.Locker, error) {
	if o.Lock != options.LockRedis {
		return lock.Local{}, nil
	}
	cfg, err := redisConfig(o, hashKeyID)
	if err != nil {
		return nil, err
	}
	lock.SetLogger(log.WithName("redis"))
	log.Info("Using Redis locks", "redis", cfg.Addr, "keyPrefix", cfg.Prefix, "lockTTL", cfg.TTL)
	l := lock.NewRedis(cfg)
	cctx, cancel := context.WithTimeout(ctx, o.Redis.SocketTimeout)
	defer cancel()
	err = l.Check(cctx)
	switch {
	case lock.IsAuthError(err):
		return nil, fmt.Errorf("%w: check USERNAME and PASSWORD", err)
	case err != nil:
		log.Error(err, "Redis unreachable; starting not ready, changes wait until it answers", "redis", cfg.Addr)
	}
	return l, nil
}

// redisConfig turns the options into the configuration of the Redis
// locker. Its keys are prefixed by the installation (Lease namespace and
// name, hash key ID), so that two installations sharing a Redis never take
// each other's changes for their own.
func redisConfig(o *options.Options, hashKeyID string) (lock.RedisConfig, error) {
	r := o.Redis
	host, _ := os.Hostname()
	cfg := lock.RedisConfig{
		Addr: net.JoinHostPort(r.Host, strconv.Itoa(r.Port)), DB: r.DB, Username: r.Username, Password: r.Password,
		Timeout: r.SocketTimeout, SentinelMaster: r.SentinelMaster, SentinelAddrs: r.SentinelAddrs, SentinelPassword: r.SentinelPassword,
		TTL: o.LockExpiration, DoneTTL: max(time.Hour, 2*o.LockExpiration), Replica: host,
		Prefix: lock.Prefix(o.OwnNamespace(), o.Lease.Name, hashKeyID),
	}
	if r.TLS {
		cfg.TLS = &tls.Config{ServerName: r.TLSServerName, MinVersion: tls.VersionTLS12}
		if r.TLSCAFile != "" {
			pem, err := os.ReadFile(r.TLSCAFile)
			if err != nil {
				return cfg, fmt.Errorf("read REDIS_TLS_CA_FILE: %w", err)
			}
			cfg.TLS.RootCAs = x509.NewCertPool()
			if !cfg.TLS.RootCAs.AppendCertsFromPEM(pem) {
				return cfg, fmt.Errorf("REDIS_TLS_CA_FILE %s holds no PEM certificate", r.TLSCAFile)
			}
		}
	}
	return cfg, nil
}

// lockMonitor checks the lock backend every few seconds, on every replica:
// it drives /readyz, the watcher_lock_backend_up metric and a log line on
// every change of state.
type lockMonitor struct {
	locker   lock.Locker
	interval time.Duration
	log      logr.Logger
	up       atomic.Bool
}

func (m *lockMonitor) NeedLeaderElection() bool { return false }

func (m *lockMonitor) Start(ctx context.Context) error {
	t := time.NewTicker(m.interval)
	defer t.Stop()
	first := true
	for {
		cctx, cancel := context.WithTimeout(ctx, m.interval)
		err := m.locker.Check(cctx)
		cancel()
		switch up := err == nil; {
		case ctx.Err() != nil:
			return nil
		case up && (first || !m.up.Load()):
			m.log.Info("Lock backend answers")
		case !up && (first || m.up.Load()):
			m.log.Error(err, "Lock backend does not answer; changes wait and are retried until it does")
		}
		first = false
		m.up.Store(err == nil)
		metrics.LockBackendUp.Set(boolFloat(err == nil))
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Check is the /readyz check of the lock backend.
func (m *lockMonitor) Check(*http.Request) error {
	if !m.up.Load() {
		return errors.New("lock backend does not answer")
	}
	return nil
}

// leaderGauge sets watcher_leader to 1 once this replica processes changes.
type leaderGauge struct{ needLeader bool }

func (g leaderGauge) NeedLeaderElection() bool { return g.needLeader }

func (g leaderGauge) Start(ctx context.Context) error {
	metrics.Leader.Set(1)
	<-ctx.Done()
	metrics.Leader.Set(0)
	return nil
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// claimer returns the function that tells whether this replica reports a
// change outside the work queue (a SealedSecret's): only a replica that
// processes changes (leading: the leader in the lease mode), and, where
// several do (the redis mode), the one that takes the change's lock. A
// lock backend that fails does not lose the report: it may be made twice.
func claimer(leading func() bool, locker lock.Locker, log logr.Logger) func(context.Context, string) bool {
	return func(ctx context.Context, id string) bool {
		if !leading() {
			return false
		}
		held, outcome, err := locker.Acquire(ctx, id)
		switch {
		case err != nil:
			metrics.Errors.WithLabelValues("lock").Inc()
			log.Error(err, "Cannot take the lock of the change; reporting it anyway", "change", id)
			return true
		case outcome != lock.Acquired:
			return false
		}
		if err := held.Release(context.WithoutCancel(ctx), true); err != nil {
			metrics.Errors.WithLabelValues("lock").Inc()
			log.Error(err, "Cannot release the lock of the change", "change", id)
		}
		return true
	}
}

// isClosed tells whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
