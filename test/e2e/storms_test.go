package e2e

import (
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/cluster"
	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/test/fixture"
)

// guardsOff turns the restart guards off, for the tests that make many
// changes to test something else (locks, failover, queues).
var guardsOff = []string{"--restart-budget=0", "--flap-threshold=0", "--max-concurrent-rollouts=0"}

// slowDeployment is a one-replica Deployment whose pods become Ready delay
// after they are scheduled (see cluster.ReadyDelayAnnotation).
func slowDeployment(ns, name string, spec corev1.PodSpec, delay time.Duration) *appsv1.Deployment {
	d := fixture.Deployment(ns, name, spec)
	d.Spec.Template.Annotations = map[string]string{cluster.ReadyDelayAnnotation: delay.String()}
	return d
}

// TestWavesOfRollouts: 20 Deployments share a ConfigMap; with
// --max-concurrent-rollouts=3, a change never has more than 3 of them
// rolling at once (pods take a second to become Ready), and all roll once,
// in the order of their priority then name.
func TestWavesOfRollouts(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	cm := fixture.ConfigMap(ns, "shared", map[string]string{"ca": "1"})
	create(t, cm)
	const n = 20
	var deps []*appsv1.Deployment
	for i := range n {
		d := slowDeployment(ns, name("app", i), fixture.EnvFrom("shared", ""), time.Second)
		if i == n-1 {
			d.Annotations = map[string]string{guard.PriorityAnnotation: "1"} // first, though last by name
		}
		deps = append(deps, d)
		create(t, d)
	}
	w := startWatcher(t, "watcher", ns, "--max-concurrent-rollouts=3")
	for _, d := range deps {
		waitAdopted(t, d)
		waitRunning(t, d)
	}
	setData(t, cm, "ca", "2")

	// Watch from outside, as kubectl rollout status would.
	var peak atomic.Int32
	started := map[string]time.Time{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			var list appsv1.DeploymentList
			if err := k8s.List(ctx, &list, client.InNamespace(ns)); err == nil {
				rolling, restarted := int32(0), 0
				for i := range list.Items {
					d := &list.Items[i]
					if guard.Mark(&d.Spec.Template) == "" {
						continue
					}
					restarted++
					if _, ok := started[d.Name]; !ok {
						started[d.Name] = time.Now()
					}
					if guard.Rolling(d) {
						rolling++
					}
				}
				if rolling > peak.Load() {
					peak.Store(rolling)
				}
				if restarted == n && rolling == 0 {
					return
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		t.Fatalf("not all rolled after 90s; peak %d", peak.Load())
	}
	g.Expect(peak.Load()).To(BeNumerically("<=", 3), "rollouts in progress at once")
	g.Expect(peak.Load()).To(BeNumerically(">=", 2), "rollouts ran in parallel")
	g.Expect(started[name("app", n-1)]).To(BeTemporally("<=", started[name("app", 5)]), "the prioritized workload rolled in the first wave: %v", started)
	for _, d := range deps {
		waitRunning(t, d)
		g.Expect(replicaSets(t, d)).To(Equal(2), "ReplicaSets of %s", d.Name)
	}
	m := w.Metrics(t)
	g.Expect(metric(m, `watcher_held_restarts_total{reason="wave"}`)).To(BeNumerically(">=", n-3))
	g.Expect(metric(m, `watcher_restarts_held{reason="wave"}`)).To(BeZero())
	g.Expect(metric(m, `watcher_rollout_duration_seconds_count{kind="Deployment"}`)).To(BeNumerically("==", n))
	g.Expect(w.Logs.Matching("\tRestart held\t", "wave")).To(HaveLen(int(metric(m, `watcher_held_restarts_total{reason="wave"}`))))
	g.Expect(w.Logs.Matching("\tHeld restart released\t", "wave")).To(HaveLen(int(metric(m, `watcher_held_restarts_total{reason="wave"}`))))
}

// TestFlappingSecretIsHeld: a Secret rewritten every second by two field
// managers is held, with a Warning naming both on the Secret and on the
// workload; once it settles, one rollout brings the workload to its final
// content.
func TestFlappingSecretIsHeld(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	sec := fixture.Secret(ns, "tls", map[string]string{"crt": "0"})
	create(t, sec)
	dep := fixture.Deployment(ns, "shop", fixture.EnvFrom("", "tls"))
	create(t, dep)
	w := startWatcher(t, "watcher", ns, "--flap-threshold=3/1m", "--flap-quiet=4s")
	waitAdopted(t, dep)
	waitRunning(t, dep)

	managers := []string{"cert-manager-certificates-issuing", "vault-injector"}
	const writes = 10
	for i := 1; i <= writes; i++ {
		owner := managers[i%2]
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := get(t, &corev1.Secret{ObjectMeta: fixture.Meta(ns, "tls")})
			cur.Data["crt"] = []byte(strconv.Itoa(i))
			return k8s.Update(ctx, cur, client.FieldOwner(owner))
		})
		g.Expect(err).NotTo(HaveOccurred())
		time.Sleep(time.Second)
	}
	lastWrite := time.Now()
	for _, kind := range []string{"Secret", "Deployment"} {
		g.Eventually(func() string {
			return eventNote(t, ns, kind, map[string]string{"Secret": "Flapping", "Deployment": "RestartHeld"}[kind])
		}, wait, 100*time.Millisecond).
			Should(And(ContainSubstring("Secret "+ns+"/tls changed"), ContainSubstring(managers[0]), ContainSubstring(managers[1]),
				ContainSubstring("quiet for 4s")), "Warning on the %s", kind)
	}
	waitRunning(t, dep)
	g.Eventually(func() bool { return digestMatches(t, dep, sec) }, wait, 200*time.Millisecond).Should(BeTrue(), "the workload runs the final content")
	var last time.Time
	g.Expect(k8sRSTimes(t, dep, &last)).To(BeNumerically("<=", 1+4), "ReplicaSets: the first and at most 4 rollouts (3 before it flaps, 1 after)")
	g.Expect(last).To(BeTemporally(">=", lastWrite.Add(3*time.Second).Truncate(time.Second)), "the last rollout waited for the quiet period")
	g.Expect(w.Logs.Matching("\tRestart held\t", "flapping")).To(HaveLen(1))
	g.Expect(w.Logs.Matching("\tHeld restart released\t", "flapping")).To(HaveLen(1))
	g.Expect(metric(w.Metrics(t), `watcher_held_restarts_total{reason="flapping"}`)).To(BeNumerically("==", 1))
}

// TestRestartBudget: with a budget of 2 restarts per 20s, five changes give
// two rollouts, then one more, to the final content, once the first leaves
// the window.
func TestRestartBudget(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	cm := fixture.ConfigMap(ns, "cfg", map[string]string{"a": "0"})
	create(t, cm)
	dep := fixture.Deployment(ns, "web", fixture.EnvFrom("cfg", ""))
	tr := track(t, dep)
	w := startWatcher(t, "watcher", ns, "--restart-budget=2/20s", "--flap-threshold=0")
	waitAdopted(t, dep)
	start := time.Now()
	for i := 1; i <= 5; i++ {
		setData(t, cm, "a", strconv.Itoa(i))
		time.Sleep(1500 * time.Millisecond)
	}
	g.Expect(tr.Count()).To(Equal(2), "two rollouts within the budget")
	g.Eventually(func() string { return eventNote(t, ns, "Deployment", "RestartHeld") }, wait, 100*time.Millisecond).
		Should(ContainSubstring("budget 2 per 20s"))
	stayRollouts(t, tr, 2, time.Until(start.Add(17*time.Second)))
	waitRollouts(t, tr, 3)
	rs := tr.Rollouts()
	g.Expect(rs[2].At.Sub(rs[0].At)).To(BeNumerically(">=", 19*time.Second), "the third waited for the first to leave the window")
	waitRunning(t, dep)
	g.Expect(digestMatches(t, dep, cm)).To(BeTrue(), "the workload runs the final content")
	stayRollouts(t, tr, 3, 2*time.Second)
	g.Expect(w.Logs.Matching("\tRestart held\t", "budget")).To(HaveLen(1))
	g.Expect(metric(w.Metrics(t), `watcher_held_restarts_total{reason="budget"}`)).To(BeNumerically("==", 1))
}

// TestFailedRolloutHoldsItsWave: a rollout that cannot finish (its new pod
// can never be scheduled) fails after --rollout-timeout and holds the other
// restarts of its change, until a person releases them on the ConfigMap.
func TestFailedRolloutHoldsItsWave(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	cm := fixture.ConfigMap(ns, "cfg", map[string]string{"a": "0"})
	create(t, cm)
	stuck := fixture.Deployment(ns, "stuck", fixture.EnvFrom("cfg", ""))
	stuck.Annotations = map[string]string{guard.PriorityAnnotation: "0"}
	// One node, and pods that refuse to share it: the surge pod of a
	// rollout never schedules.
	stuck.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "stuck"}},
			TopologyKey:   "kubernetes.io/hostname",
		}},
	}}
	others := []*appsv1.Deployment{fixture.Deployment(ns, "a", fixture.EnvFrom("cfg", "")), fixture.Deployment(ns, "b", fixture.EnvFrom("cfg", ""))}
	trStuck := track(t, stuck)
	for _, d := range others {
		create(t, d)
	}
	w := startWatcher(t, "watcher", ns, "--max-concurrent-rollouts=1", "--rollout-timeout=4s")
	for _, d := range append(others, stuck) {
		waitAdopted(t, d)
		waitRunning(t, d)
	}
	setData(t, cm, "a", "1")
	waitRollouts(t, trStuck, 1)
	g.Eventually(func() string { return eventNote(t, ns, "Deployment", "RolloutFailed") }, wait, 100*time.Millisecond).
		Should(ContainSubstring("Rollout not done after 4s"))
	waitLog(t, w, "\tRestart held\t", "failed-rollout")
	g.Consistently(func() []int { return []int{replicaSets(t, others[0]), replicaSets(t, others[1])} }, 2*time.Second, 100*time.Millisecond).
		Should(Equal([]int{1, 1}), "the rest of the wave is held")
	m := w.Metrics(t)
	g.Expect(metric(m, `watcher_failed_rollouts_total{kind="Deployment"}`)).To(BeNumerically("==", 1))
	g.Expect(metric(m, `watcher_restarts_held{reason="failed-rollout"}`)).To(BeNumerically(">=", 1))

	// A person releases the holds on the ConfigMap.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := get(t, &corev1.ConfigMap{ObjectMeta: fixture.Meta(ns, "cfg")})
		metav1.SetMetaDataAnnotation(&cur.ObjectMeta, guard.ReleaseAnnotation, "1")
		return k8s.Update(ctx, cur)
	})
	g.Expect(err).NotTo(HaveOccurred())
	for _, d := range others {
		g.Eventually(func() int { return replicaSets(t, d) }, wait, 100*time.Millisecond).Should(Equal(2), "%s rolled once released", d.Name)
		waitRunning(t, d)
	}
	g.Expect(metric(w.Metrics(t), `watcher_restarts_held{reason="failed-rollout"}`)).To(BeZero())
}

// replicaSets counts the ReplicaSets of d: one per rollout, plus the first.
func replicaSets(t *testing.T, d client.Object) int {
	return k8sRSTimes(t, d, nil)
}

// k8sRSTimes counts the ReplicaSets of d and sets last to the creation
// time of the newest.
func k8sRSTimes(t *testing.T, d client.Object, last *time.Time) int {
	t.Helper()
	var list appsv1.ReplicaSetList
	if err := k8s.List(ctx, &list, client.InNamespace(d.GetNamespace()), client.MatchingLabels{"app": d.GetName()}); err != nil {
		t.Fatal(err)
	}
	for _, rs := range list.Items {
		if last != nil && rs.CreationTimestamp.After(*last) {
			*last = rs.CreationTimestamp.Time
		}
	}
	return len(list.Items)
}

// eventNote returns the notes of the Events with reason on objects of kind
// in ns, joined.
func eventNote(t *testing.T, ns, kind, reason string) string {
	t.Helper()
	var notes []string
	for _, e := range events(t, ns, kind, reason) {
		notes = append(notes, e.Note)
	}
	return strings.Join(notes, "\n")
}

// digestMatches reports whether the record on w holds the hashes of the
// current content of config, computed with the installation's hash key.
func digestMatches(t *testing.T, w, config client.Object) bool {
	t.Helper()
	var key corev1.Secret
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: w.GetNamespace(), Name: "watcher-hash-key"}, &key); err != nil {
		t.Fatal(err)
	}
	k, err := hash.KeyOf(&key)
	if err != nil {
		t.Fatal(err)
	}
	cur := get(t, config)
	d, err := hash.NewHasher(k).OfObject(cur)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := plan.ParseRecord(get(t, w).GetAnnotations()[plan.RecordAnnotation])
	if err != nil {
		return false
	}
	kind := "ConfigMap"
	if _, ok := cur.(*corev1.Secret); ok {
		kind = "Secret"
	}
	e := rec[kind+"/"+cur.GetName()]
	if e == nil {
		return false
	}
	for k, h := range d.Keys {
		if e.Keys[k] != h {
			return false
		}
	}
	return len(e.Keys) == len(d.Keys)
}

// metric returns the value of the sample named exactly series in a
// /metrics text, 0 if absent.
func metric(text, series string) float64 {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	m := re.FindStringSubmatch(text)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}
