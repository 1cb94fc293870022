package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// healthServer answers 503 to the first notReady requests, then 200.
func healthServer(t *testing.T, notReady int32) string {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) <= notReady {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestControllerProcess(t *testing.T) {
	t.Run("ready, then stopped once", func(t *testing.T) {
		g := NewWithT(t)
		logPath := filepath.Join(t.TempDir(), "controller.log")
		g.Expect(os.WriteFile(logPath, []byte("last run\n"), 0o644)).To(Succeed())
		p, err := startController([]string{"/bin/sh", "-c", `echo "up as $BENCH_USER"; exec sleep 30`},
			[]string{"BENCH_USER=tester"}, logPath)
		g.Expect(err).NotTo(HaveOccurred())
		defer p.stop()
		g.Expect(p.pid()).NotTo(BeZero())

		toReady, err := p.waitReady(t.Context(), healthServer(t, 2), 5*time.Second)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(toReady).To(BeNumerically(">=", 2*readyPoll), "two polls answered 503")
		g.Expect(p.running()).To(Succeed())

		p.stop()
		p.stop() // only the first call acts
		g.Expect(p.running()).To(MatchError(HavePrefix("controller exited (signal: terminated); " + logPath + " ends:\n")))
		log, err := os.ReadFile(logPath)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(log)).To(MatchRegexp(`^### \S+ /bin/sh -c echo .*\nup as tester\n$`), "a fresh log")
	})

	t.Run("exits before it is ready", func(t *testing.T) {
		g := NewWithT(t)
		logPath := filepath.Join(t.TempDir(), "controller.log")
		p, err := startController([]string{"/bin/sh", "-c", "echo unknown flag >&2; exit 2"}, nil, logPath)
		g.Expect(err).NotTo(HaveOccurred())
		defer p.stop()
		_, err = p.waitReady(t.Context(), healthServer(t, 1000), 5*time.Second)
		g.Expect(err).To(MatchError(HavePrefix("controller exited (exit status 2); " + logPath + " ends:\n")))
		g.Expect(err).To(MatchError(HaveSuffix("\nunknown flag")))
	})

	t.Run("never ready", func(t *testing.T) {
		g := NewWithT(t)
		logPath := filepath.Join(t.TempDir(), "controller.log")
		p, err := startController([]string{"sleep", "30"}, nil, logPath)
		g.Expect(err).NotTo(HaveOccurred())
		defer p.stop()
		url := healthServer(t, 1000)
		_, err = p.waitReady(t.Context(), url, 300*time.Millisecond)
		g.Expect(err).To(MatchError("controller not ready after 300ms: context deadline exceeded (last: GET " +
			url + ": 503 Service Unavailable); see " + logPath))
	})

	t.Run("cannot start", func(t *testing.T) {
		g := NewWithT(t)
		logPath := filepath.Join(t.TempDir(), "controller.log")
		_, err := startController(nil, nil, logPath)
		g.Expect(err).To(MatchError("start controller: empty command"))
		_, err = startController([]string{filepath.Join(t.TempDir(), "missing")}, nil, logPath)
		g.Expect(err).To(MatchError(HavePrefix("start controller: ")))
		_, err = startController([]string{"sleep"}, nil, filepath.Join(t.TempDir(), "no", "dir.log"))
		g.Expect(err).To(MatchError(HavePrefix("create controller log: ")))
	})
}
