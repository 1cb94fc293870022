package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/test/fixture"
)

// TestWavesFairBetweenNamespaces (issue 16, item 2): namespace A has four
// Deployments whose pods never become Ready, sharing a ConfigMap, with the
// most urgent priority there is; namespace B has one ordinary Deployment.
// With two rollout slots, A's change takes one slot at a time, and B's
// change, made while A's restarts wait, rolls at once in the other: A's
// priority orders only A's restarts. A's later restarts wait for the
// timeouts of the earlier ones, which gives a Warning RestartWaitingLong
// and waits longer than the timeout in watcher_wave_wait_seconds.
func TestWavesFairBetweenNamespaces(t *testing.T) {
	g := NewWithT(t)
	nsA := namespace(t)
	nsB := nsA + "-b"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsB}})
	const timeout = 5 * time.Second
	sharedA := fixture.ConfigMap(nsA, "shared", map[string]string{"a": "0"})
	cfgB := fixture.ConfigMap(nsB, "cfg", map[string]string{"b": "0"})
	create(t, sharedA, cfgB)
	var stuck []*appsv1.Deployment
	for i := range 4 {
		d := slowDeployment(nsA, name("stuck", i), fixture.EnvFrom("shared", ""), time.Hour)
		d.Annotations = map[string]string{guard.PriorityAnnotation: "-1000"}
		stuck = append(stuck, d)
		create(t, d)
	}
	web := fixture.Deployment(nsB, "web", fixture.EnvFrom("cfg", ""))
	create(t, web)
	w := startWatcher(t, "watcher", nsA, "--namespaces="+nsA+","+nsB,
		"--max-concurrent-rollouts=2", "--rollout-timeout="+timeout.String(), "--on-failed-rollout=continue")
	for _, d := range stuck {
		waitAdopted(t, d)
	}
	waitAdopted(t, web)
	waitRunning(t, web)

	setData(t, sharedA, "a", "1")
	g.Eventually(func() int { return rolled(t, stuck) }, wait, 50*time.Millisecond).Should(Equal(1), "A's first restart")
	g.Eventually(func() string { return eventNotes(t, nsA, "Deployment", "RestartWaiting", "") }, wait, 50*time.Millisecond).
		Should(ContainSubstring("waiting for a rollout slot"), "A's other restarts wait in the wave")

	changedB := time.Now()
	setData(t, cfgB, "b", "1")
	g.Eventually(func() int { return replicaSets(t, web) }, 3*time.Second, 20*time.Millisecond).Should(Equal(2), "B rolled at once")
	tookB := time.Since(changedB)
	g.Expect(rolled(t, stuck)).To(Equal(1), "A still holds one slot and its other restarts still wait when B rolls")
	waitRunning(t, web)
	t.Logf("B's ReplicaSet came %s after its change, while A waited", tookB.Round(time.Millisecond))

	// A rolls one at a time: each failed rollout frees its slot after the
	// timeout; B's slot is kept for another namespace.
	g.Eventually(func() string { return eventNotes(t, nsA, "Deployment", "RestartWaitingLong", corev1.EventTypeWarning) }, 4*timeout, 100*time.Millisecond).
		Should(ContainSubstring("waiting for a rollout slot for longer than "+timeout.String()), "Warning on a restart of A that waits long")
	g.Eventually(func() int { return rolled(t, stuck) }, 4*timeout, 100*time.Millisecond).Should(BeNumerically(">=", 3), "A goes on, one slot at a time")
	m := w.Metrics(t)
	g.Expect(metric(m, "watcher_rollouts_in_progress")).To(BeNumerically("<=", 1), "A never holds both slots")
	count, within := metric(m, "watcher_wave_wait_seconds_count"), metric(m, `watcher_wave_wait_seconds_bucket{le="5"}`)
	t.Logf("watcher_wave_wait_seconds: %v restarts admitted, %v of them within 5s", count, within)
	g.Expect(count).To(BeNumerically(">=", 3), "restarts admitted by the wave: A's first two and B's")
	g.Expect(within).To(BeNumerically("<", count), "a restart of A waited longer than the timeout")
	g.Expect(replicaSets(t, web)).To(Equal(2), "B rolled once")
}

// rolled counts the Deployments of ds that watcher restarted (two
// ReplicaSets or more).
func rolled(t *testing.T, ds []*appsv1.Deployment) int {
	t.Helper()
	n := 0
	for _, d := range ds {
		if replicaSets(t, d) > 1 {
			n++
		}
	}
	return n
}

// eventNotes returns the notes of the Events with reason (and type, if
// not empty) on objects of kind in ns, joined.
func eventNotes(t *testing.T, ns, kind, reason, typ string) string {
	t.Helper()
	var notes []string
	for _, e := range events(t, ns, kind, reason) {
		if typ == "" || e.Type == typ {
			notes = append(notes, e.Note)
		}
	}
	return strings.Join(notes, "\n")
}

// events returns the Events with reason on objects of kind in ns.
func events(t *testing.T, ns, kind, reason string) []eventsv1.Event {
	t.Helper()
	return env.EventsWhere(t, ns, func(e eventsv1.Event) bool { return e.Reason == reason && e.Regarding.Kind == kind })
}

// TestAlertsOncePerEventAndInert (issue 16, item 7): two replicas in the
// lease mode send to a local webhook. A ConfigMap rewritten by a writer
// whose field manager is a mention and a link flaps: one flapping alert
// and one held alert arrive, not one per replica, and no string in them
// carries the mention, the link or markup. A ConfigMap no workload uses,
// rewritten as often, gives no Flapping Event and no alert.
func TestAlertsOncePerEventAndInert(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	box := &inbox{}
	srv := httptest.NewServer(box)
	t.Cleanup(srv.Close)
	cm := fixture.ConfigMap(ns, "cfg", map[string]string{"a": "0"})
	unused := fixture.ConfigMap(ns, "unused", map[string]string{"a": "0"})
	create(t, cm, unused)
	web := fixture.Deployment(ns, "web", fixture.EnvFrom("cfg", ""))
	create(t, web)
	args := []string{"--lock=lease", "--lease-duration=4s", "--lease-renew-deadline=3s", "--lease-retry-period=1s",
		"--flap-threshold=3/1m", "--flap-quiet=30s", "--restart-budget=0", "--max-concurrent-rollouts=0",
		"--alert-sink=webhook", "--alert-webhook-url=" + srv.URL + "/hook", "--alert-on-held=true", "--alert-on-flapping=true"}
	replicas := []*proc{startWatcher(t, "watcher-0", ns, args...), startWatcher(t, "watcher-1", ns, args...)}
	for _, p := range replicas {
		p.WaitReady(t)
	}
	waitLeader(t, replicas)
	waitAdopted(t, web)
	waitRunning(t, web)

	const writer = "<!channel> <@U123> see https://evil.example/x *now*"
	for i := 1; i <= 6; i++ {
		for _, c := range []*corev1.ConfigMap{cm, unused} {
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur := get(t, c.DeepCopy())
				cur.Data["a"] = strconv.Itoa(i)
				return k8s.Update(ctx, cur, client.FieldOwner(writer))
			})
			g.Expect(err).NotTo(HaveOccurred())
		}
		time.Sleep(300 * time.Millisecond)
	}
	g.Eventually(func() string { return eventNotes(t, ns, "ConfigMap", "Flapping", corev1.EventTypeWarning) }, wait, 100*time.Millisecond).
		Should(ContainSubstring("ConfigMap "+ns+"/cfg"), "Flapping Event on cfg")
	g.Eventually(func() []string { return box.events() }, wait, 50*time.Millisecond).
		Should(ContainElements("flapping", "held"), "alerts")
	g.Consistently(func() []string { return box.events() }, 5*time.Second, 100*time.Millisecond).
		Should(ConsistOf("flapping", "held"), "one alert per event, from one replica")
	for _, e := range events(t, ns, "ConfigMap", "Flapping") {
		g.Expect(e.Regarding.Name).To(Equal("cfg"), "Flapping Event on a ConfigMap no workload uses")
	}
	for _, body := range box.bodies() {
		t.Logf("alert: %s", body)
		var a map[string]any
		g.Expect(json.Unmarshal([]byte(body), &a)).To(Succeed())
		// No mention (<!channel>, <@U123>), no link with a scheme, no
		// markup. The webhook's detail keeps dots and slashes of the
		// writer's name (alert.detailText): "evil.example/x" stays, as a
		// bare domain.
		for _, s := range stringsIn(a) {
			g.Expect(s).NotTo(Or(ContainSubstring("<"), ContainSubstring(">"), ContainSubstring("://"),
				ContainSubstring("*"), ContainSubstring("@")), "a string of the alert")
		}
		g.Expect(body).NotTo(ContainSubstring("unused"), "an alert about the ConfigMap no workload uses")
	}
}

// inbox is a webhook receiver that keeps the bodies it gets.
type inbox struct {
	mu  sync.Mutex
	got []string
}

func (b *inbox) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.got = append(b.got, string(body))
}

func (b *inbox) bodies() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.got)
}

// events returns the event field of each alert received.
func (b *inbox) events() []string {
	var out []string
	for _, body := range b.bodies() {
		var a struct{ Event string }
		_ = json.Unmarshal([]byte(body), &a)
		out = append(out, a.Event)
	}
	return out
}

// stringsIn returns every string value in a decoded JSON value.
func stringsIn(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			out = append(out, stringsIn(x)...)
		}
		return out
	case map[string]any:
		var out []string
		for _, x := range v {
			out = append(out, stringsIn(x)...)
		}
		return out
	}
	return nil
}

// TestHugeReloadListCostsLittle (issue 16, item 1): a Deployment whose
// reload list is 12,000 entries `a{1000}` (about 96 KB; one there when
// watcher starts, one created while it runs) is refused with a Warning
// InvalidAnnotation and the error metric; so are lists under the length
// limit that would compile to large programs (7,000 entries, and 255
// entries each over the program budget). Watcher's peak RSS stays under
// the chart's memory limit, and another Deployment still restarts on the
// change of its ConfigMap.
func TestHugeReloadListCostsLittle(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	limit := chartMemoryLimit(t)
	lists := map[string]string{}
	huge := func(name string, entries int) *appsv1.Deployment {
		list := strings.TrimSuffix(strings.Repeat("a{1000},", entries), ",")
		lists[name] = list
		d := fixture.Deployment(ns, name, fixture.EnvFrom("", ""))
		d.Annotations = map[string]string{"configmap.reloader.stakater.com/reload": list}
		return d
	}
	cm := fixture.ConfigMap(ns, "cfg", map[string]string{"a": "0"})
	web := fixture.Deployment(ns, "web", fixture.EnvFrom("cfg", ""))
	create(t, cm, web, huge("huge-0", 12000))
	w := startWatcher(t, "watcher", ns)
	w.WaitReady(t)
	create(t, huge("huge-1", 12000), huge("huge-2", 7000), huge("huge-3", 255))
	waitAdopted(t, web)
	waitRunning(t, web)

	g.Eventually(func() []string {
		var names []string
		for _, e := range events(t, ns, "Deployment", "InvalidAnnotation") {
			if e.Type == corev1.EventTypeWarning {
				names = append(names, e.Regarding.Name)
			}
		}
		return names
	}, wait, 100*time.Millisecond).Should(ContainElements("huge-0", "huge-1", "huge-2", "huge-3"), "Warning InvalidAnnotation on each")
	t.Logf("InvalidAnnotation: %s", eventNotes(t, ns, "Deployment", "InvalidAnnotation", corev1.EventTypeWarning))
	g.Expect(metricValue(t, w, `watcher_errors_total{operation="annotation"}`)).To(BeNumerically(">=", 4))
	setData(t, cm, "a", "1")
	g.Eventually(func() int { return replicaSets(t, web) }, wait, 20*time.Millisecond).Should(Equal(2), "web restarted")
	waitRunning(t, web)
	for name := range lists {
		g.Expect(replicaSets(t, &appsv1.Deployment{ObjectMeta: fixture.Meta(ns, name)})).To(Equal(1), "%s not restarted", name)
	}
	select {
	case <-w.Done():
		t.Fatalf("watcher exited: %v", w.State())
	default:
	}
	hwm := peakRSS(t, w)
	t.Logf("watcher's peak RSS (VmHWM) with reload lists of %d, %d and %d bytes: %.1f MiB; the chart's limit: %.0f MiB",
		len(lists["huge-0"]), len(lists["huge-2"]), len(lists["huge-3"]), float64(hwm)/(1<<20), float64(limit)/(1<<20))
	g.Expect(hwm).To(BeNumerically("<", limit), "peak RSS under the chart's memory limit")
}

// peakRSS returns the VmHWM of p's process, in bytes.
func peakRSS(t *testing.T, p *proc) int64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^VmHWM:\s+(\d+) kB$`).FindSubmatch(status)
	if m == nil {
		t.Fatalf("no VmHWM in the status of %s:\n%s", p.Name, status)
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}

// chartMemoryLimit returns resources.limits.memory of the chart's values,
// in bytes.
func chartMemoryLimit(t *testing.T) int64 {
	t.Helper()
	values, err := os.ReadFile("../../deploy/helm/watcher/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^resources:\n(?:  .*\n)*?  limits: \{memory: (\S+)\}`).FindSubmatch(values)
	if m == nil {
		t.Fatal("no resources.limits.memory in the chart's values")
	}
	q, err := resource.ParseQuantity(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	return q.Value()
}
