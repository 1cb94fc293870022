package alert

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/watcher-dev/watcher/internal/metrics"
)

// The results of watcher_alerts_total.
const (
	// ResultSent: the webhook took it.
	ResultSent = "sent"
	// ResultFailed: every attempt failed, or it was refused.
	ResultFailed = "failed"
	// ResultDropped: its queue was full.
	ResultDropped = "dropped"
	// ResultLimited: its namespace sent too many alerts (Limit).
	ResultLimited = "rate-limited"
)

// Config says where and what a Sender sends.
type Config struct {
	// Sink is one of Sinks.
	Sink string
	// URL is the webhook URL; empty when it comes from a Secret (see
	// SetURL). Never logged.
	URL string
	// Proxy is the URL of an HTTP proxy to reach the webhook; empty: none
	// (not even the environment's).
	Proxy string
	// AdditionalInfo is added to every alert (the cluster's name...).
	AdditionalInfo string
	// On are the events sent (Restart, Held, Flapping, FailedRollout).
	On []string
	// QueueSize bounds the alerts waiting to be sent; 0: 100. Failed
	// rollouts have a queue of their own of the same size, emptied first.
	QueueSize int
	// Limit is the rate limit per namespace.
	Limit Limit
	// Now is the clock of the rate limit; nil: time.Now.
	Now func() time.Time
	// Attempts is how many times a send is tried; 0: 4. Backoff is the
	// wait after the first failed attempt, doubled after each; 0: 1s.
	Attempts int
	Backoff  time.Duration
	// Timeout bounds one attempt; 0: 10s.
	Timeout time.Duration
	// Log receives failures.
	Log logr.Logger
}

// Sender is a Notifier that posts alerts to a webhook from a bounded
// queue. It is a manager.Runnable: its worker runs from Start.
type Sender struct {
	cfg    Config
	queue  chan Alert
	urgent chan Alert // failed rollouts: never behind held or flapping alerts
	client *http.Client

	limitMu sync.Mutex
	limiter *limiter

	mu       sync.Mutex
	url      string
	urlKnown chan struct{} // closed once the URL is known
}

// NewSender checks cfg and returns a Sender. With cfg.URL empty, nothing is
// sent until SetURL.
func NewSender(cfg Config) (*Sender, error) {
	if !slices.Contains(Sinks, cfg.Sink) {
		return nil, fmt.Errorf("unknown alert sink %q (want one of %v)", cfg.Sink, Sinks)
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = 100
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 4
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = nil
	if cfg.Proxy != "" {
		p, err := url.Parse(cfg.Proxy)
		if err != nil {
			return nil, errors.New("invalid alert webhook proxy: want a URL such as http://proxy:3128")
		}
		transport.Proxy = http.ProxyURL(p)
	}
	s := &Sender{
		cfg:     cfg,
		queue:   make(chan Alert, cfg.QueueSize),
		urgent:  make(chan Alert, cfg.QueueSize),
		limiter: newLimiter(cfg.Limit),
		client: &http.Client{
			Transport: transport,
			Timeout:   cfg.Timeout,
			// A redirect of a webhook URL is refused, as Reloader does: it
			// is a mistyped or revoked URL, and following it would send
			// the alert where nobody configured it to go.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		urlKnown: make(chan struct{}),
	}
	if cfg.URL != "" {
		s.SetURL(cfg.URL)
	}
	return s, nil
}

// SetURL sets the webhook URL (read from a Secret); the first call lets the
// worker start sending.
func (s *Sender) SetURL(u string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.url = u
	select {
	case <-s.urlKnown:
	default:
		close(s.urlKnown)
	}
}

func (s *Sender) currentURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

// Notify queues a for sending if its event is switched on and its
// namespace is within its rate limit: a failed rollout in the urgent queue,
// anything else in the other. What is not queued is counted, as
// rate-limited or (its queue full) dropped.
func (s *Sender) Notify(a Alert) {
	if !slices.Contains(s.cfg.On, a.Event) {
		return
	}
	s.limitMu.Lock()
	ok, newlyDry := s.limiter.allow(a, s.cfg.Now())
	s.limitMu.Unlock()
	if !ok {
		metrics.Alerts.WithLabelValues(s.cfg.Sink, ResultLimited).Inc()
		if newlyDry { // once per run of refusals, not per alert
			s.cfg.Log.Info("Too many alerts about one namespace; alerts rate-limited", "sink", s.cfg.Sink, "event", a.Event, "namespace", namespaceOf(a))
		}
		return
	}
	q := s.queue
	if class(a) == 1 {
		q = s.urgent
	}
	select {
	case q <- a:
	default:
		metrics.Alerts.WithLabelValues(s.cfg.Sink, ResultDropped).Inc()
		s.cfg.Log.Info("Alert queue full; alert dropped", "sink", s.cfg.Sink, "event", a.Event)
	}
}

// NeedLeaderElection is false: alerts come from whichever replica acts.
func (s *Sender) NeedLeaderElection() bool { return false }

// Start sends the queued alerts, one at a time, failed rollouts first,
// until ctx is done.
func (s *Sender) Start(ctx context.Context) error {
	select {
	case <-s.urlKnown:
	case <-ctx.Done():
		return nil
	}
	for ctx.Err() == nil {
		select {
		case a := <-s.urgent:
			s.deliver(ctx, a)
			continue
		default:
		}
		select {
		case <-ctx.Done():
			return nil
		case a := <-s.urgent:
			s.deliver(ctx, a)
		case a := <-s.queue:
			s.deliver(ctx, a)
		}
	}
	return nil
}

// deliver sends a, trying up to Attempts times with a doubling backoff,
// and counts the result.
func (s *Sender) deliver(ctx context.Context, a Alert) {
	body, err := Format(s.cfg.Sink, a, s.cfg.AdditionalInfo)
	if err != nil { // a sink NewSender accepted always formats
		metrics.Alerts.WithLabelValues(s.cfg.Sink, ResultFailed).Inc()
		return
	}
	wait := s.cfg.Backoff
	for attempt := 1; ; attempt++ {
		retry, err := s.post(ctx, body)
		if err == nil {
			metrics.Alerts.WithLabelValues(s.cfg.Sink, ResultSent).Inc()
			return
		}
		last := !retry || attempt == s.cfg.Attempts
		s.cfg.Log.Error(err, "Cannot send alert", "sink", s.cfg.Sink, "event", a.Event, "attempt", attempt, "retrying", !last)
		if last {
			metrics.Alerts.WithLabelValues(s.cfg.Sink, ResultFailed).Inc()
			return
		}
		select {
		case <-ctx.Done():
			metrics.Alerts.WithLabelValues(s.cfg.Sink, ResultFailed).Inc()
			return
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// post sends body once. retry says whether trying again may help: not
// after a refusal (a 4xx other than 429, a redirect).
func (s *Sender) post(ctx context.Context, body []byte) (retry bool, err error) {
	u := s.currentURL()
	if u == "" {
		return false, errors.New("no webhook URL (its Secret has no such key, or is gone)")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return false, errors.New("invalid webhook URL") // never the URL itself
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) { // its message holds the URL: leave it out
			err = fmt.Errorf("post alert: %w", ue.Err)
		}
		return true, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch {
	case resp.StatusCode < 300:
		return false, nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return true, fmt.Errorf("post alert: %s", resp.Status)
	default:
		return false, fmt.Errorf("post alert: %s (not retried)", resp.Status)
	}
}
