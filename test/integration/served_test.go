package integration

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/test/observe"
)

// requests counts the requests made through a transport, by "METHOD
// path?watch", safe for concurrent use.
type requests struct {
	mu   sync.Mutex
	seen []string
}

func (r *requests) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		name := req.Method + " " + req.URL.Path
		if req.URL.Query().Get("watch") == "true" {
			name += " (watch)"
		}
		r.mu.Lock()
		r.seen = append(r.seen, name)
		r.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// since returns the requests made since the n-th.
func (r *requests) since(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen[n:]...)
}

func (r *requests) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

// discoveryCalls returns the requests of reqs that ask the discovery API:
// GET /api, /apis and their group versions, with no resource.
func discoveryCalls(reqs []string) []string {
	var out []string
	for _, r := range reqs {
		path, ok := strings.CutPrefix(r, "GET ")
		if !ok {
			continue
		}
		parts := strings.Split(strings.Trim(path, "/"), "/")
		if (parts[0] == "api" && len(parts) <= 2) || (parts[0] == "apis" && len(parts) <= 3) {
			out = append(out, r)
		}
	}
	return out
}

// TestNoIdlePolling: an idle watcher (no Lease in this mode) makes no
// request at all for 10s: the optional APIs (Argo Rollouts, SealedSecrets,
// ReloadPolicies) are followed through a watch of their CRDs, not by asking
// discovery every few seconds. The Rollout CRD installed then is picked up
// within seconds, with a few discovery calls; removed, Rollouts are no
// longer watched and watcher is idle again.
//
// Not parallel: the Rollout CRD is cluster-wide.
func TestNoIdlePolling(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	crd := rolloutCRD(t)
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(crd), crd.DeepCopy()); !apierrors.IsNotFound(err) {
		t.Fatalf("the Rollout CRD is already there (%v)", err)
	}
	create(t, configMap(ns, "cfg", map[string]string{"a": "1"}), deployment(ns, "web", envFrom("cfg", "")))
	reqs := &requests{}
	cfg := rest.CopyConfig(restConfig)
	cfg.Wrap(reqs.wrap)
	startWatcherWith(t, cfg, ns)
	waitAdopted(t, deployment(ns, "web", envFrom("cfg", "")))
	time.Sleep(2 * time.Second) // the start-up's last requests

	n := reqs.len()
	time.Sleep(10 * time.Second)
	g.Expect(reqs.since(n)).To(BeEmpty(), "requests of an idle watcher")

	n = reqs.len()
	create(t, crd)
	t.Cleanup(func() { _ = k8s.Delete(ctx, crd) })
	installed := time.Now()
	g.Eventually(func() error { // until the API server serves Rollouts
		_, err := observe.Track(t.Context(), restConfig, rollout(t, ns, "canary", withTemplate(t, "canary", "cfg")))
		return err
	}, wait, 100*time.Millisecond).Should(Succeed())
	waitAdopted(t, rollout(t, ns, "canary", map[string]any{}))
	took := time.Since(installed)
	t.Logf("Rollout adopted %s after the CRD was created; discovery calls: %v", took.Round(time.Millisecond), discoveryCalls(reqs.since(n)))
	g.Expect(took).To(BeNumerically("<", 10*time.Second), "the Rollout CRD picked up through the CRD watch")
	// Each event of the CRD (created, names accepted, established) may
	// cost one look at discovery (/api, /apis, the group version); on a
	// loaded machine the API server takes longer to serve the new group and
	// the look is repeated once or twice. Polling every few seconds for the
	// seconds this takes would cost more, and the idle checks before and
	// after hold that nothing is polled.
	g.Expect(len(discoveryCalls(reqs.since(n)))).To(BeNumerically("<=", 12), "discovery calls after the CRD was created")

	// The CRD removed: the Rollout informers stop (they would otherwise
	// retry their list and watch, refused), and watcher is idle again.
	if err := k8s.Delete(ctx, crd); err != nil {
		t.Fatal(err)
	}
	g.Eventually(func() error {
		return k8s.Get(ctx, client.ObjectKeyFromObject(crd), crd.DeepCopy())
	}, wait, 100*time.Millisecond).Should(Satisfy(apierrors.IsNotFound), "the CRD deleted")
	time.Sleep(3 * time.Second)
	n = reqs.len()
	time.Sleep(5 * time.Second)
	g.Expect(reqs.since(n)).To(BeEmpty(), "requests after the CRD went")
}
