package e2e

import (
	"strconv"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/watcher-dev/watcher/test/fixture"
)

// TestServiceLinks: Kubernetes puts REDIS_PORT=tcp://<ip>:6379 (and more)
// into every pod of a namespace holding a Service named redis. Such an
// environment does not stop watcher in the lease mode, and in the redis
// mode the tcp://host:port form gives the port. The chart's Deployment
// turns these variables off (test/install checks it).
func TestServiceLinks(t *testing.T) {
	links := func(hostPort string) []string {
		return []string{"REDIS_SERVICE_HOST=10.96.0.5", "REDIS_SERVICE_PORT=6379", "REDIS_PORT=tcp://" + hostPort,
			"REDIS_PORT_6379_TCP=tcp://" + hostPort, "REDIS_PORT_6379_TCP_PROTO=tcp", "REDIS_PORT_6379_TCP_ADDR=10.96.0.5"}
	}
	for _, tc := range []struct {
		name string
		env  []string
	}{
		{"service links", links("10.96.0.5:6379")},
		{"an invalid REDIS_PORT", []string{"REDIS_PORT=tcp://10.96.0.5", "DB=x"}},
	} {
		t.Run("lease mode with "+tc.name, func(t *testing.T) {
			ns := namespace(t)
			cm := fixture.ConfigMap(ns, "cfg", map[string]string{"a": "1"})
			create(t, cm)
			dep := fixture.Deployment(ns, "web", fixture.EnvFrom("cfg", ""))
			tr := track(t, dep)
			w := startWatcherEnv(t, "watcher", ns, tc.env)
			w.WaitReady(t)
			waitLog(t, w, "Starting watcher", `"lock": "lease"`)
			waitAdopted(t, dep)
			setData(t, cm, "a", "2")
			waitRollouts(t, tr, 1)
		})
	}

	t.Run("redis mode with a port from a link", func(t *testing.T) {
		ns := namespace(t)
		cm := fixture.ConfigMap(ns, "cfg", map[string]string{"a": "1"})
		create(t, cm)
		dep := fixture.Deployment(ns, "web", fixture.EnvFrom("cfg", ""))
		tr := track(t, dep)
		redis := startRedis(t)
		// The host is REDIS_HOST's; only the port is read from the link.
		env := append(links("10.96.0.5:"+strconv.Itoa(redis.Port)), "REDIS_HOST=127.0.0.1")
		w := startWatcherEnv(t, "watcher", ns, env)
		waitBackendUp(t, w)
		waitAdopted(t, dep)
		setData(t, cm, "a", "2")
		waitRollouts(t, tr, 1)
		NewWithT(t).Expect(metricValue(t, w, acquisitions("acquired"))).To(Equal(1.0), "the change went through a Redis lock")
	})
}
