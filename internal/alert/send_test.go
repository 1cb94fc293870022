package alert_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/watcher-dev/watcher/internal/alert"
	"github.com/watcher-dev/watcher/internal/metrics"
)

// receiver is a webhook that answers with the statuses in order (the last
// one from then on) and records the bodies.
type receiver struct {
	mu       sync.Mutex
	statuses []int
	bodies   []string
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bodies = append(r.bodies, string(b))
	status := r.statuses[0]
	if len(r.statuses) > 1 {
		r.statuses = r.statuses[1:]
	}
	w.WriteHeader(status)
}

func (r *receiver) requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.bodies)
}

// logs collects log lines.
type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, prefix+" "+args)
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// start runs a Sender until the test ends.
func start(t *testing.T, cfg alert.Config) (*alert.Sender, *logs) {
	t.Helper()
	l := &logs{}
	cfg.Log = funcr.New(l.add, funcr.Options{})
	if cfg.Backoff == 0 {
		cfg.Backoff = 10 * time.Millisecond
	}
	if cfg.On == nil {
		cfg.On = []string{alert.Restart}
	}
	s, err := alert.NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s, l
}

func count(sink, result string) float64 {
	return testutil.ToFloat64(metrics.Alerts.WithLabelValues(sink, result))
}

func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !f(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
	}
}

var restart = alerts["restart"]

// TestSenderResults: how each answer of the webhook ends, in requests made
// and in watcher_alerts_total.
func TestSenderResults(t *testing.T) {
	for _, tt := range []struct {
		name         string
		statuses     []int
		wantRequests int
		wantResult   string
	}{
		{"sent at once", []int{200}, 1, alert.ResultSent},
		{"sent after two 500s", []int{500, 503, 204}, 3, alert.ResultSent},
		{"429 is retried", []int{429, 200}, 2, alert.ResultSent},
		{"failing every attempt", []int{500}, 4, alert.ResultFailed},
		{"refused: not retried", []int{404}, 1, alert.ResultFailed},
		{"redirected: not followed", []int{302}, 1, alert.ResultFailed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rcv := &receiver{statuses: tt.statuses}
			srv := httptest.NewServer(rcv)
			defer srv.Close()
			before := count(alert.Slack, tt.wantResult)
			s, _ := start(t, alert.Config{Sink: alert.Slack, URL: srv.URL})
			s.Notify(restart)
			eventually(t, "the result counted", func() bool { return count(alert.Slack, tt.wantResult) == before+1 })
			time.Sleep(50 * time.Millisecond) // no more attempts
			if got := rcv.requests(); got != tt.wantRequests {
				t.Errorf("%d requests, want %d", got, tt.wantRequests)
			}
		})
	}
}

// TestSenderNeverBlocks: while the webhook hangs, Notify returns at once;
// what the bounded queue cannot hold is dropped and counted; the hung
// request ends at the timeout, counted as failed.
func TestSenderNeverBlocks(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	dropped, failed := count(alert.Teams, alert.ResultDropped), count(alert.Teams, alert.ResultFailed)
	s, _ := start(t, alert.Config{Sink: alert.Teams, URL: srv.URL, QueueSize: 2, Attempts: 1, Timeout: 300 * time.Millisecond})
	began := time.Now()
	for i := range 10 { // ten namespaces: within their rate limits
		s.Notify(inNamespace(restart, fmt.Sprintf("ns-%d", i)))
	}
	if d := time.Since(began); d > time.Second {
		t.Errorf("10 Notify calls took %s while the webhook hangs", d)
	}
	// One in flight (or not yet taken), two queued: at least 7 dropped.
	if got := count(alert.Teams, alert.ResultDropped) - dropped; got < 7 {
		t.Errorf("%v dropped, want at least 7", got)
	}
	eventually(t, "the hung attempt counted as failed", func() bool { return count(alert.Teams, alert.ResultFailed) > failed })
}

// TestSenderSwitches: only the events switched on are sent.
func TestSenderSwitches(t *testing.T) {
	rcv := &receiver{statuses: []int{200}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	sent := count(alert.Webhook, alert.ResultSent)
	s, _ := start(t, alert.Config{Sink: alert.Webhook, URL: srv.URL, On: []string{alert.Held}})
	s.Notify(restart)
	s.Notify(alerts["held"])
	eventually(t, "one alert sent", func() bool { return count(alert.Webhook, alert.ResultSent) == sent+1 })
	time.Sleep(50 * time.Millisecond)
	if rcv.requests() != 1 || !strings.Contains(rcv.bodies[0], `"event": "held"`) {
		t.Errorf("received %q, want the held alert only", rcv.bodies)
	}
}

// TestSenderURL: with no URL yet (it comes from a Secret), alerts wait in
// the queue; once set they go, to the latest URL. A failure never logs the
// URL, which holds the webhook's token.
func TestSenderURL(t *testing.T) {
	rcv := &receiver{statuses: []int{200}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	s, l := start(t, alert.Config{Sink: alert.GChat, Attempts: 2})
	s.Notify(restart)
	time.Sleep(50 * time.Millisecond)
	if rcv.requests() != 0 {
		t.Fatalf("sent with no URL")
	}
	failed := count(alert.GChat, alert.ResultFailed)
	s.SetURL("http://127.0.0.1:1/v1/spaces/sEcReTtOkEn") // nothing listens
	eventually(t, "the failure counted", func() bool { return count(alert.GChat, alert.ResultFailed) == failed+1 })
	if !strings.Contains(l.String(), "Cannot send alert") {
		t.Errorf("the failure is not logged:\n%s", l)
	}
	s.SetURL(srv.URL + "/v1/spaces/sEcReTtOkEn")
	s.Notify(restart)
	eventually(t, "the alert received", func() bool { return rcv.requests() == 1 })
	if strings.Contains(l.String(), "sEcReTtOkEn") {
		t.Errorf("the logs show the URL:\n%s", l)
	}
	s.SetURL("")
	failed = count(alert.GChat, alert.ResultFailed)
	s.Notify(restart)
	eventually(t, "no URL counted as failed", func() bool { return count(alert.GChat, alert.ResultFailed) == failed+1 })
}

// inNamespace returns a copy of a about namespace ns.
func inNamespace(a alert.Alert, ns string) alert.Alert {
	if a.Workload != nil {
		w := *a.Workload
		w.Namespace = ns
		a.Workload = &w
	}
	src := make([]alert.Source, len(a.Sources))
	for i, s := range a.Sources {
		s.Namespace = ns
		src[i] = s
	}
	a.Sources = src
	return a
}

func TestNewSenderChecks(t *testing.T) {
	if _, err := alert.NewSender(alert.Config{Sink: "pagerduty"}); err == nil {
		t.Errorf("an unknown sink is accepted")
	}
	_, err := alert.NewSender(alert.Config{Sink: alert.Slack, Proxy: "http://u:sEcReT@[::1"})
	if err == nil || strings.Contains(err.Error(), "sEcReT") {
		t.Errorf("a bad proxy: error %v, want one that does not show it", err)
	}
}
