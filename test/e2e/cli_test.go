package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestCommandLine: --help, an invalid setting, JSON logs, and metrics on a
// port chosen at run time, as a user meets them.
func TestCommandLine(t *testing.T) {
	g := NewWithT(t)

	code, out := runWatcher(t, nil, "--help")
	g.Expect(code).To(Equal(0))
	g.Expect(out).To(ContainSubstring("--lock-expiration-time seconds\n        env LOCK_EXPIRATION_TIME, default 300"))
	g.Expect(out).To(ContainSubstring("env IGNORE_SECRET_NAMESPACES, default ingress-aws-lb-controller,istio-system,karpenter,kube-system,kubesphere-system"))

	code, out = runWatcher(t, []string{"LOCK_BACKEND=redis", "LOCK_EXPIRATION_TIME=abc", "DB=-1"})
	g.Expect(code).To(Equal(2))
	g.Expect(out).To(ContainSubstring(`invalid LOCK_EXPIRATION_TIME "abc": want a whole number of seconds`))
	g.Expect(out).To(ContainSubstring(`invalid DB "-1"`))

	ns := namespace(t)
	w := startWatcher(t, "watcher", ns, "--log-format=json", "--lock=none", "--metrics-addr=127.0.0.1:0")
	w.WaitReady(t)
	var start map[string]any
	for _, line := range w.Logs.Matching("Starting watcher") {
		g.Expect(json.Unmarshal([]byte(line), &start)).To(Succeed(), "a JSON log line: %s", line)
	}
	g.Expect(start).To(HaveKeyWithValue("msg", "Starting watcher"))
	addr, _ := start["metricsAddr"].(string)
	g.Expect(addr).To(MatchRegexp(`^127\.0\.0\.1:[1-9][0-9]*$`), "the log says where /metrics is")
	for _, name := range []string{"watcher_watched_objects", "watcher_leader 1", "watcher_lock_backend_up 1"} {
		g.Eventually(func() string {
			resp, err := http.Get("http://" + addr + "/metrics")
			if err != nil {
				return err.Error()
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return string(body)
		}, 10*time.Second).Should(MatchRegexp(`(?m)^`+regexp.QuoteMeta(name)), "metric %s", name)
	}
}
