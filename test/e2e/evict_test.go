package e2e

import (
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/controller"
	"github.com/watcher-dev/watcher/test/fixture"
)

// pdb returns a PodDisruptionBudget of the pods labelled app=name.
func pdb(ns, name string, minAvailable, maxUnavailable *intstr.IntOrString) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: fixture.Meta(ns, name),
		Spec: policyv1.PodDisruptionBudgetSpec{
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			MinAvailable: minAvailable, MaxUnavailable: maxUnavailable,
		},
	}
}

// podWatch polls the pods labelled app=name, as an observer outside
// watcher would: every pod seen, and the fewest Ready at once.
type podWatch struct {
	mu       sync.Mutex
	seen     map[types.UID]string
	minReady int
	stop     chan struct{}
	done     chan struct{}
}

func watchPods(t *testing.T, ns, name string) *podWatch {
	w := &podWatch{seen: map[types.UID]string{}, minReady: 1 << 30, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			var pods corev1.PodList
			if err := k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": name}); err == nil {
				ready := 0
				w.mu.Lock()
				for i := range pods.Items {
					p := &pods.Items[i]
					w.seen[p.UID] = p.Name
					if p.DeletionTimestamp == nil && podReady(p) {
						ready++
					}
				}
				w.minReady = min(w.minReady, ready)
				w.mu.Unlock()
			}
			select {
			case <-w.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { w.Stop() })
	return w
}

// Stop ends the polling and returns how many pods were seen and the
// fewest Ready at once.
func (w *podWatch) Stop() (int, int) {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.seen), w.minReady
}

// runningPods returns the pods labelled app=name that are not terminating,
// and whether each is Ready.
func runningPods(t *testing.T, ns, name string) map[types.UID]bool {
	t.Helper()
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": name}); err != nil {
		t.Fatal(err)
	}
	out := map[types.UID]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil {
			out[p.UID] = podReady(p)
		}
	}
	return out
}

// replicaSetUIDs returns the UIDs of the ReplicaSets of Deployment name.
func replicaSetUIDs(t *testing.T, ns, name string) []types.UID {
	t.Helper()
	var list appsv1.ReplicaSetList
	if err := k8s.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{"app": name}); err != nil {
		t.Fatal(err)
	}
	var out []types.UID
	for _, rs := range list.Items {
		out = append(out, rs.UID)
	}
	return out
}

// eventNotesOn returns the notes of the Events of reason on object name.
func eventNotesOn(t *testing.T, ns, name, reason string) []string {
	t.Helper()
	return env.Events(t, ns, name, reason)
}

// TestEvictStrategy: with --restart-strategy evict, a change of the
// ConfigMap of a 3-replica Deployment whose pods take 2s to become Ready,
// under a PodDisruptionBudget maxUnavailable 1, replaces every pod exactly
// once (6 pods seen in all: no replacement is evicted), never has fewer
// than 2 pods Ready, creates no ReplicaSet and leaves the pod template as
// it was. (The Deployment's generation moves: the API server bumps it on
// any change of a Deployment's annotations, the record's included.)
func TestEvictStrategy(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	cm := fixture.ConfigMap(ns, "shared", map[string]string{"k": "1"})
	d := slowDeployment(ns, "web", fixture.EnvFrom("shared", ""), 2*time.Second)
	d.Spec.Replicas = ptr.To[int32](3)
	create(t, cm, d, pdb(ns, "web", nil, ptr.To(intstr.FromInt32(1))))
	startWatcher(t, "watcher", ns, "--restart-strategy=evict")
	waitAdopted(t, d)
	waitRunning(t, d)
	g.Eventually(func() int { return len(runningPods(t, ns, "web")) }, wait).Should(Equal(3))
	before := get(t, d).DeepCopy()
	rsBefore := replicaSetUIDs(t, ns, "web")
	g.Expect(rsBefore).To(HaveLen(1))
	old := runningPods(t, ns, "web")

	pods := watchPods(t, ns, "web")
	setData(t, cm, "k", "2")
	g.Eventually(func(g Gomega) {
		now := runningPods(t, ns, "web")
		g.Expect(now).To(HaveLen(3))
		for uid, ready := range now {
			g.Expect(old).NotTo(HaveKey(uid), "an old pod still runs")
			g.Expect(ready).To(BeTrue(), "a replacement is not Ready")
		}
	}, 2*wait, 100*time.Millisecond).Should(Succeed())
	time.Sleep(3 * time.Second) // a replacement evicted again would show
	seen, minReady := pods.Stop()
	g.Expect(seen).To(Equal(6), "pods seen: 3 old and 3 replacements, each replaced once")
	g.Expect(minReady).To(BeNumerically(">=", 2), "the PodDisruptionBudget allows 1 unavailable of 3")
	g.Expect(replicaSetUIDs(t, ns, "web")).To(Equal(rsBefore), "no new ReplicaSet")
	after := get(t, d)
	g.Expect(after.Spec.Template).To(Equal(before.Spec.Template), "the pod template is left alone")
	g.Expect(eventNotesOn(t, ns, "web", "Restarted")).To(HaveLen(1))
}

// TestEvictBlocked: a PodDisruptionBudget that allows no eviction (one
// replica, minAvailable 1) gives a Warning EvictionBlocked naming it, and
// the pod is not replaced; once the budget is relaxed the restart goes on
// and the pod is replaced.
func TestEvictBlocked(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	cm := fixture.ConfigMap(ns, "shared", map[string]string{"k": "1"})
	d := slowDeployment(ns, "web", fixture.EnvFrom("shared", ""), time.Second)
	budget := pdb(ns, "web", ptr.To(intstr.FromInt32(1)), nil)
	create(t, cm, d, budget)
	startWatcher(t, "watcher", ns, "--restart-strategy=evict")
	waitAdopted(t, d)
	waitRunning(t, d)
	old := runningPods(t, ns, "web")
	g.Expect(old).To(HaveLen(1))

	setData(t, cm, "k", "2")
	g.Eventually(func() []string { return eventNotesOn(t, ns, "web", controller.ReasonEvictionBlocked) }, wait).
		Should(ContainElement(ContainSubstring("web")))
	notes := eventNotesOn(t, ns, "web", controller.ReasonEvictionBlocked)
	g.Expect(strings.Join(notes, " ")).To(ContainSubstring("disruption budget web"), "the PDB is named")
	g.Consistently(func() map[types.UID]bool { return runningPods(t, ns, "web") }, 3*time.Second).Should(Equal(old), "blocked: the pod stays")

	edit(t, budget, func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable = ptr.To(intstr.FromInt32(0)) })
	g.Eventually(func(g Gomega) {
		now := runningPods(t, ns, "web")
		g.Expect(now).To(HaveLen(1))
		for uid, ready := range now {
			g.Expect(old).NotTo(HaveKey(uid))
			g.Expect(ready).To(BeTrue())
		}
	}, wait, 100*time.Millisecond).Should(Succeed())
}
