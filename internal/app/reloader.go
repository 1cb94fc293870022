package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// reloaderServer serves, on Options.ReloaderAddr, what Stakater Reloader's
// Deployment asks of the process in its container, on its port "http"
// (9090):
//
//	GET /live     the liveness probe: 200 while the manager runs
//	GET /metrics  the readiness probe and Reloader's PodMonitor: the
//	              registry of watcher's own /metrics (controller-runtime's),
//	              Reloader's counters included (package metrics)
//
// It runs on every replica, leader or not, as Reloader's probes do.
type reloaderServer struct {
	addr string
	log  logr.Logger
}

// NeedLeaderElection is false: a replica that waits for the Lease is alive
// and ready too.
func (reloaderServer) NeedLeaderElection() bool { return false }

// Start serves until ctx is done. An address it cannot listen on stops
// the manager: Reloader's probes would fail anyway.
func (s reloaderServer) Start(ctx context.Context) error {
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", s.addr)
	if err != nil {
		return fmt.Errorf("listen on %s (--reloader-addr): %w", s.addr, err)
	}
	srv := &http.Server{Handler: reloaderMux(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(stop)
	}()
	s.log.Info("Serving Reloader's probes and metrics", "reloaderAddr", l.Addr().String())
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve on %s (--reloader-addr): %w", s.addr, err)
	}
	return nil
}

// reloaderMux routes /live and /metrics (see reloaderServer).
func reloaderMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /live", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	})
	// As controller-runtime's metrics server serves it.
	mux.Handle("GET /metrics", promhttp.HandlerFor(ctrlmetrics.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	return mux
}

// ownAddr returns the address one of watcher's own servers (/metrics, the
// probes' /healthz and /readyz) listens on, from addr (see pickPort).
// In Reloader's Deployment (reloader: Options.ReloaderAddr is on), where
// every probe and scrape goes to Reloader's port, they serve nothing that
// is needed: an address another process of the pod holds (a sidecar on
// 8080) turns that server off, said in the log, instead of stopping
// watcher. Elsewhere the manager fails on it, as before.
func ownAddr(addr, what string, reloader bool, log logr.Logger) (string, error) {
	addr, err := pickPort(addr)
	if err != nil || !reloader || addr == "0" {
		return addr, err
	}
	l, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		log.Info("Address in use: not serving it, Reloader's address serves /live and /metrics", "server", what, "addr", addr)
		return "0", nil
	}
	if err == nil {
		_ = l.Close()
	}
	return addr, nil
}
