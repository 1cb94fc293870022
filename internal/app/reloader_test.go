package app

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/watcher-dev/watcher/internal/metrics"
)

// TestReloaderServer runs the server of Reloader's probes on a free port,
// as the manager runs it: /live answers 200, /metrics serves Reloader's
// counter from the registry of watcher's own /metrics, anything else is
// not found, and the port is free again once ctx is done.
func TestReloaderServer(t *testing.T) {
	addr := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- reloaderServer{addr: addr, log: logr.Discard()}.Start(ctx) }()
	metrics.Restart("Deployment", "apps", metrics.Restarted)

	for _, tc := range []struct {
		path     string
		code     int
		contains string
	}{
		{path: "/live", code: http.StatusOK, contains: "ok"},
		{path: "/metrics", code: http.StatusOK, contains: `reloader_reload_executed_total{success="true"}`},
		{path: "/metrics", code: http.StatusOK, contains: "watcher_restarts_total"},
		{path: "/readyz", code: http.StatusNotFound},
	} {
		code, body := getRetry(t, "http://"+addr+tc.path)
		if code != tc.code || !strings.Contains(body, tc.contains) {
			t.Errorf("GET %s = %d, want %d with %q:\n%.300s", tc.path, code, tc.code, tc.contains, body)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not stop")
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("port not freed: %v", err)
	}
	l.Close()
}

// TestReloaderServerPortTaken: a port Reloader's probes need that another
// process holds stops the manager with an error naming the flag.
func TestReloaderServerPortTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	err = reloaderServer{addr: l.Addr().String(), log: logr.Discard()}.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "--reloader-addr") {
		t.Errorf("Start on a taken port = %v, want an error naming --reloader-addr", err)
	}
}

// TestOwnAddr: in Reloader's Deployment a taken address of watcher's own
// servers turns them off ("0"); elsewhere it is kept (the manager reports
// it), and port 0 still becomes a free port.
func TestOwnAddr(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().String()
	free := freePort(t)
	for _, tc := range []struct {
		name, addr string
		reloader   bool
		want       string // "free": some free port of 127.0.0.1
	}{
		{name: "taken, Reloader's Deployment", addr: taken, reloader: true, want: "0"},
		{name: "taken, watcher's own install", addr: taken, want: taken},
		{name: "free, Reloader's Deployment", addr: free, reloader: true, want: free},
		{name: "off", addr: "0", reloader: true, want: "0"},
		{name: "port 0, Reloader's Deployment", addr: "127.0.0.1:0", reloader: true, want: "free"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ownAddr(tc.addr, "metrics", tc.reloader, logr.Discard())
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "free" {
				if host, port, err := net.SplitHostPort(got); err != nil || host != "127.0.0.1" || port == "0" {
					t.Errorf("ownAddr = %q, want a free port of 127.0.0.1", got)
				}
				return
			}
			if got != tc.want {
				t.Errorf("ownAddr = %q, want %q", got, tc.want)
			}
		})
	}
}

// freePort returns a local address no one listens on.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// getRetry GETs url until the server answers (it starts in a goroutine),
// and returns the status and body.
func getRetry(t *testing.T, url string) (int, string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return resp.StatusCode, string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
