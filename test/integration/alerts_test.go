package integration

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/watcher-dev/watcher/internal/alert"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/options"
)

// inbox is a webhook receiver that records the alerts it gets.
type inbox struct {
	mu     sync.Mutex
	alerts []map[string]any
}

func (b *inbox) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var m map[string]any
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &m); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.alerts = append(b.alerts, m)
}

func (b *inbox) received() []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]map[string]any(nil), b.alerts...)
}

// TestAlertsDelivered: a restart is announced to the webhook as plain JSON
// naming the workload, the Secret and its changed keys, never a value. The
// URL comes from a Secret; when the Secret changes, alerts go to the new
// URL.
func TestAlertsDelivered(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	first, second := &inbox{}, &inbox{}
	srv1, srv2 := httptest.NewServer(first), httptest.NewServer(second)
	defer srv1.Close()
	defer srv2.Close()
	urls := secret(ns, "alerts", map[string]string{"url": srv1.URL + "/hook"})
	sec := secret(ns, "db", map[string]string{"password": "s3cr3t-one"})
	create(t, urls, sec)
	web := track(t, deployment(ns, "web", envFrom("", "db")))
	w := startWatcher(t, ns, func(o *options.Options) {
		o.Alert = options.Alerts{OnReload: true, Sink: "webhook", WebhookURLSecret: ns + "/alerts:url", AdditionalInfo: "cluster test"}
	})
	waitAdopted(t, deployment(ns, "web", envFrom("", "db")))

	setSecret(t, sec, "password", "s3cr3t-two")
	waitRollouts(t, web, 1)
	g.Eventually(first.received, wait, 20*time.Millisecond).Should(HaveLen(1))
	a := first.received()[0]
	g.Expect(a).To(HaveKeyWithValue("event", "restart"))
	g.Expect(a).To(HaveKeyWithValue("workload", map[string]any{"kind": "Deployment", "namespace": ns, "name": "web"}))
	g.Expect(a).To(HaveKeyWithValue("sources", ConsistOf(And(
		HaveKeyWithValue("kind", "Secret"), HaveKeyWithValue("namespace", ns), HaveKeyWithValue("name", "db"),
		HaveKeyWithValue("keys", []any{"password"}), HaveKey("changedBy"), // see TestWhoChangedIt
	))))
	g.Expect(a).To(HaveKeyWithValue("message", HavePrefix("watcher restarted Deployment "+ns+"/web because Secret "+ns+"/db changed (keys: password) by ")))
	g.Expect(a).To(HaveKeyWithValue("additionalInfo", "cluster test"))

	setSecret(t, urls, "url", srv2.URL+"/hook")
	waitLog(t, w, "Alert webhook URL read from its Secret")
	g.Eventually(func() int { return len(w.logs.Lines("Alert webhook URL read from its Secret")) }, wait, 20*time.Millisecond).Should(Equal(2))
	setSecret(t, sec, "password", "s3cr3t-three")
	waitRollouts(t, web, 2)
	g.Eventually(second.received, wait, 20*time.Millisecond).Should(HaveLen(1))
	g.Consistently(first.received, quiet, 50*time.Millisecond).Should(HaveLen(1))
	g.Expect(w.logs.String()).NotTo(Or(ContainSubstring("s3cr3t"), ContainSubstring(srv1.URL), ContainSubstring(srv2.URL)))
}

// TestAlertsNeverDelayRestarts: whether the webhook hangs or answers 500,
// each of three changes in a row restarts its workload promptly (within a
// generous bound; without coalescing a restart takes milliseconds); the
// failed alerts are retried, then counted as failed.
func TestAlertsNeverDelayRestarts(t *testing.T) {
	t.Parallel()
	const bound = 5 * time.Second
	for _, tt := range []struct {
		name    string
		sink    string // a sink per case, so that its counters are its own
		handler http.HandlerFunc
		counted bool
	}{
		// It reads the request (the server notices a closed connection
		// only then), and never answers.
		{"hangs", "teams", func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body); <-r.Context().Done() }, false},
		// Four attempts, 1s+2s+4s apart: counted within about 7s.
		{"fails", "gchat", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			ns := namespace(t)
			srv := httptest.NewServer(tt.handler)
			t.Cleanup(srv.Close)
			t.Cleanup(srv.CloseClientConnections) // first: Close waits for the hung request
			sec := secret(ns, "db", map[string]string{"password": "0"})
			create(t, sec)
			web := track(t, deployment(ns, "web", envFrom("", "db")))
			failed := testutil.ToFloat64(metrics.Alerts.WithLabelValues(tt.sink, alert.ResultFailed))
			startWatcher(t, ns, func(o *options.Options) {
				o.Alert = options.Alerts{OnReload: true, Sink: tt.sink, WebhookURL: srv.URL}
			})
			waitAdopted(t, deployment(ns, "web", envFrom("", "db")))
			for i := 1; i <= 3; i++ {
				changed := time.Now()
				setSecret(t, sec, "password", string(rune('0'+i)))
				g.Eventually(web.Count, bound, 10*time.Millisecond).Should(Equal(i), "restart %d while the webhook %s", i, tt.name)
				t.Logf("restart %d %s after the change", i, web.Rollouts()[i-1].At.Sub(changed).Round(time.Millisecond))
			}
			if tt.counted {
				g.Eventually(func() float64 { return testutil.ToFloat64(metrics.Alerts.WithLabelValues(tt.sink, alert.ResultFailed)) },
					30*time.Second, 100*time.Millisecond).Should(BeNumerically(">", failed))
			}
		})
	}
}
