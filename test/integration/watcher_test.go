package integration

import (
	"context"
	"net/http"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/watcher-dev/watcher/internal/app"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/test/fixture"
)

// instance is one watcher running in the test process.
type instance struct {
	logs   *logBuffer
	cancel context.CancelFunc
	done   chan error
}

// startWatcher runs watcher limited to namespace ns, with no coalescing
// delay, and waits until it is ready. It is stopped when the test ends.
func startWatcher(t *testing.T, ns string, modify ...func(*options.Options)) *instance {
	t.Helper()
	return startWatcherWith(t, restConfig, ns, modify...)
}

// startWatcherWith is startWatcher reading the API server with cfg.
func startWatcherWith(t *testing.T, cfg *rest.Config, ns string, modify ...func(*options.Options)) *instance {
	t.Helper()
	o := options.Defaults()
	o.Namespaces = []string{ns}
	o.Coalesce = 0
	o.PrintInterval = 0
	o.Lock = options.LockNone // every instance active; the lock modes have their own tests
	o.MetricsAddr = "0"
	o.HealthAddr = fixture.FreeAddr(t)
	// No deployment controller runs here, so no rollout is ever done:
	// with waves, the eleventh restart of a test would wait forever.
	// TestWaves* of test/e2e test them.
	o.MaxConcurrentRollouts = 0
	for _, m := range modify {
		m(o)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &instance{logs: &logBuffer{}, cancel: cancel, done: make(chan error, 1)}
	go func() { w.done <- app.Run(ctx, cfg, o, w.logs.logger()) }()
	t.Cleanup(w.Stop)

	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + o.HealthAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return w
			}
		}
		select {
		case err := <-w.done:
			t.Fatalf("watcher stopped before it was ready: %v\n%s", err, w.logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("watcher not ready after 30s\n%s", w.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop stops the instance and waits for it; calling it again does nothing.
func (w *instance) Stop() {
	if w.cancel == nil {
		return
	}
	w.cancel()
	w.cancel = nil
	<-w.done
}
