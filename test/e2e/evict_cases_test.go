package e2e

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/cluster"
	"github.com/watcher-dev/watcher/internal/controller"
	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/hold"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/test/fixture"
)

// podUIDs returns the UID of every pod labelled app=name, terminating or
// not, by pod name.
func podUIDs(t *testing.T, ns, name string) map[string]types.UID {
	t.Helper()
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": name}); err != nil {
		t.Fatal(err)
	}
	out := map[string]types.UID{}
	for _, p := range pods.Items {
		out[p.Name] = p.UID
	}
	return out
}

// evictionWatch records, from a watch of the pods labelled app=name, the
// pods deleted through the eviction subresource: the API server gives an
// evicted pod the condition DisruptionTarget (reason
// EvictionByEvictionAPI) before deleting it, which no other deletion (the
// StatefulSet controller's, the node's) sets. Only watcher evicts in the
// tests, so these are watcher's evictions, whatever pods the workload's
// controller creates or deletes besides.
type evictionWatch struct {
	mu      sync.Mutex
	evicted []string // pod names, in the order of their eviction
	uids    map[types.UID]bool
}

// watchEvictions watches the pods labelled app=name in ns until the test
// ends.
func watchEvictions(t *testing.T, ns, name string) *evictionWatch {
	t.Helper()
	wc, err := client.NewWithWatch(kube.RESTConfig(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var pods corev1.PodList
	if err := wc.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": name}); err != nil {
		t.Fatal(err)
	}
	e := &evictionWatch{uids: map[types.UID]bool{}}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		rv := pods.ResourceVersion
		for wctx.Err() == nil {
			var list corev1.PodList
			list.ResourceVersion = rv
			w, err := wc.Watch(wctx, &list, client.InNamespace(ns), client.MatchingLabels{"app": name},
				&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				rv = p.ResourceVersion
				e.observe(p)
			}
			w.Stop()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return e
}

// observe records p if it is being evicted.
func (e *evictionWatch) observe(p *corev1.Pod) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == "EvictionByEvictionAPI" {
			e.mu.Lock()
			if !e.uids[p.UID] {
				e.uids[p.UID] = true
				e.evicted = append(e.evicted, p.Name)
			}
			e.mu.Unlock()
		}
	}
}

// Evicted returns the names of the pods evicted so far, in order, and
// their UIDs.
func (e *evictionWatch) Evicted() ([]string, map[types.UID]bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.evicted), maps.Clone(e.uids)
}

// TestEvictStatefulSetOnDelete: a StatefulSet with updateStrategy OnDelete,
// restarted by evict, gets its pods evicted by watcher, highest ordinal
// first, each once, and replaced (new pods, Ready), with no new
// ControllerRevision and its template and generation unchanged. The
// evictions are counted from the pods the eviction API deleted, not from
// the pods that came and went: the StatefulSet controller may replace a
// pod more than once (a pod it deletes and creates again on its own) without
// any eviction by watcher.
func TestEvictStatefulSetOnDelete(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	cm := fixture.ConfigMap(ns, "shared", map[string]string{"k": "1"})
	s := fixture.StatefulSet(ns, "db", fixture.EnvFrom("shared", ""))
	s.Spec.Replicas = ptr.To[int32](3)
	s.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType
	s.Spec.Template.Annotations = map[string]string{cluster.ReadyDelayAnnotation: "1s"}
	create(t, cm, s)
	startWatcher(t, "watcher", ns, "--restart-strategy=evict")
	waitAdopted(t, s)
	g.Eventually(func() map[types.UID]bool { return runningPods(t, ns, "db") }, wait).Should(And(HaveLen(3), Not(ContainElement(false))))
	before := get(t, s).DeepCopy()
	var revs appsv1.ControllerRevisionList
	g.Expect(k8s.List(ctx, &revs, client.InNamespace(ns))).To(Succeed())
	revsBefore := len(revs.Items)
	old := runningPods(t, ns, "db")
	evictions := watchEvictions(t, ns, "db")

	setData(t, cm, "k", "2")
	g.Eventually(func() []string { names, _ := evictions.Evicted(); return names }, 2*wait, 50*time.Millisecond).
		Should(HaveLen(3), "every pod evicted")
	waitReplaced(t, ns, "db", old)
	g.Eventually(func() map[types.UID]bool { return runningPods(t, ns, "db") }, wait).Should(And(HaveLen(3), Not(ContainElement(false))))
	// No pod is evicted again once the restart is done.
	g.Consistently(func() []string { names, _ := evictions.Evicted(); return names }, 3*time.Second).Should(HaveLen(3))
	names, uids := evictions.Evicted()
	g.Expect(names).To(Equal([]string{"db-2", "db-1", "db-0"}), "highest ordinal first")
	for uid := range old {
		g.Expect(uids).To(HaveKey(uid), "every old pod evicted once")
	}
	after := get(t, s)
	g.Expect(after.Spec.Template).To(Equal(before.Spec.Template), "the pod template is left alone")
	g.Expect(after.Generation).To(Equal(before.Generation), "the generation is unchanged")
	g.Expect(k8s.List(ctx, &revs, client.InNamespace(ns))).To(Succeed())
	g.Expect(revs.Items).To(HaveLen(revsBefore), "no new ControllerRevision")
	g.Expect(eventNotesOn(t, ns, "db", "UpdatedOnDelete")).To(BeEmpty())
}

// TestEvictWatcherRestarted: watcher stopped in the middle of a restart by
// eviction (one pod replaced of three) and started again finishes it
// without evicting a replaced pod again: 6 pods seen in all.
func TestEvictWatcherRestarted(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	cm := fixture.ConfigMap(ns, "shared", map[string]string{"k": "1"})
	d := slowDeployment(ns, "web", fixture.EnvFrom("shared", ""), 3*time.Second)
	d.Spec.Replicas = ptr.To[int32](3)
	create(t, cm, d, pdb(ns, "web", nil, ptr.To(intstr.FromInt32(1))))
	w := startWatcher(t, "watcher", ns, "--restart-strategy=evict")
	waitAdopted(t, d)
	waitRunning(t, d)
	g.Eventually(func() int { return len(runningPods(t, ns, "web")) }, wait).Should(Equal(3))
	old := runningPods(t, ns, "web")
	pods := watchPods(t, ns, "web")
	setData(t, cm, "k", "2")
	// The first replacement is there, not Ready yet: the next eviction waits.
	g.Eventually(func() int {
		n := 0
		for _, uid := range podUIDs(t, ns, "web") {
			if _, ok := old[uid]; !ok {
				n++
			}
		}
		return n
	}, wait, 50*time.Millisecond).Should(Equal(1))
	w.Stop()
	startWatcher(t, "watcher-2", ns, "--restart-strategy=evict")
	g.Eventually(func(g Gomega) {
		now := runningPods(t, ns, "web")
		g.Expect(now).To(HaveLen(3))
		for uid, ready := range now {
			g.Expect(old).NotTo(HaveKey(uid))
			g.Expect(ready).To(BeTrue())
		}
	}, 2*wait, 100*time.Millisecond).Should(Succeed())
	time.Sleep(3 * time.Second)
	seen, minReady := pods.Stop()
	g.Expect(seen).To(Equal(6), "each pod replaced once across the restart of watcher")
	g.Expect(minReady).To(BeNumerically(">=", 2))
}

// replaced waits until the pods of name are one Ready pod, none in old.
func waitReplaced(t *testing.T, ns, name string, old map[types.UID]bool) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		now := runningPods(t, ns, name)
		g.Expect(now).NotTo(BeEmpty())
		for uid, ready := range now {
			g.Expect(old).NotTo(HaveKey(uid), "an old pod of %s still runs", name)
			g.Expect(ready).To(BeTrue(), "a replacement of %s is not Ready", name)
		}
	}, 2*wait, 100*time.Millisecond).Should(Succeed())
}

// TestEvictBlockedFails: a restart by eviction that a PodDisruptionBudget
// blocks is a failed rollout after --rollout-timeout: RolloutFailed, and
// the rest of the change (another Deployment, waiting for the one wave
// slot) is held. It is no longer looked at: relaxing the budget alone
// (not an event of the workload) replaces nothing; an event of the
// workload (here its release annotation set) resumes it, the pod is
// replaced, the rollout recovers and the held restart goes on.
func TestEvictBlockedFails(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	cm := fixture.ConfigMap(ns, "shared", map[string]string{"k": "1"})
	web := slowDeployment(ns, "web", fixture.EnvFrom("shared", ""), time.Second)
	web.Annotations = map[string]string{guard.PriorityAnnotation: "1"} // takes the slot first
	other := slowDeployment(ns, "other", fixture.EnvFrom("shared", ""), time.Second)
	budget := pdb(ns, "web", ptr.To(intstr.FromInt32(1)), nil)
	create(t, cm, web, other, budget)
	startWatcher(t, "watcher", ns, "--restart-strategy=evict", "--rollout-timeout=3s", "--max-concurrent-rollouts=1")
	for _, d := range []*appsv1.Deployment{web, other} {
		waitAdopted(t, d)
		waitRunning(t, d)
	}
	oldWeb, oldOther := runningPods(t, ns, "web"), runningPods(t, ns, "other")

	setData(t, cm, "k", "2")
	g.Eventually(func() []string { return eventNotesOn(t, ns, "web", controller.ReasonEvictionBlocked) }, wait).ShouldNot(BeEmpty())
	g.Eventually(func() []string { return eventNotesOn(t, ns, "web", hold.ReasonRolloutFailed) }, wait).ShouldNot(BeEmpty())
	g.Consistently(func() map[types.UID]bool { return runningPods(t, ns, "other") }, 3*time.Second).Should(Equal(oldOther), "the rest of the change is held")
	g.Expect(runningPods(t, ns, "web")).To(Equal(oldWeb), "blocked: the pod stays")

	edit(t, budget, func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable = ptr.To(intstr.FromInt32(0)) })
	g.Consistently(func() map[types.UID]bool { return runningPods(t, ns, "web") }, 5*time.Second).Should(Equal(oldWeb), "past its timeout: not looked at")
	edit(t, web, func(d *appsv1.Deployment) { metav1.SetMetaDataAnnotation(&d.ObjectMeta, guard.ReleaseAnnotation, "1") })
	waitReplaced(t, ns, "web", oldWeb)
	g.Eventually(func() []string { return eventNotesOn(t, ns, "web", hold.ReasonRolloutResumed) }, wait).ShouldNot(BeEmpty())
	waitReplaced(t, ns, "other", oldOther)
}

// TestEvictArgoRollout: an Argo Rollout restarted by evict gets Argo's own
// spec.restartAt: Argo's real controller replaces its pods, by its
// strategy, with no new ReplicaSet and the template left alone.
func TestEvictArgoRollout(t *testing.T) {
	g := NewWithT(t)
	dir := argoRollouts(t)
	installCRDs(t, filepath.Join(dir, "crds"))
	ns := namespace(t)
	startArgo(t, dir, ns)
	cm := fixture.ConfigMap(ns, "cfg", map[string]string{"a": "1"})
	ro := argoRollout(t, ns, "own", map[string]any{"template": template(t, "own")})
	ro.SetAnnotations(map[string]string{restart.StrategyAnnotation: "evict"})
	create(t, cm, ro)
	waitRolledOut(t, ns, "own", 1)
	startWatcher(t, "watcher", ns)
	waitAdopted(t, ro)
	before := get(t, ro).DeepCopy()
	old := runningPods(t, ns, "own")
	g.Expect(old).To(HaveLen(2))
	// Argo replaces the pods created before restartAt, a time in whole
	// seconds: pods created in the second of the restart count as new.
	time.Sleep(time.Second)

	setData(t, cm, "a", "2")
	g.Eventually(func() string {
		v, _, _ := unstructured.NestedString(get(t, ro).Object, "spec", "restartAt")
		return v
	}, wait).ShouldNot(BeEmpty(), "spec.restartAt set")
	g.Eventually(func(g Gomega) {
		now := runningPods(t, ns, "own")
		g.Expect(now).To(HaveLen(2))
		for uid, ready := range now {
			g.Expect(old).NotTo(HaveKey(uid), "an old pod still runs")
			g.Expect(ready).To(BeTrue())
		}
	}, 2*wait, 250*time.Millisecond).Should(Succeed())
	waitRolledOut(t, ns, "own", 1) // no new ReplicaSet
	tmplBefore, _, _ := unstructured.NestedMap(before.Object, "spec", "template")
	tmplAfter, _, _ := unstructured.NestedMap(get(t, ro).Object, "spec", "template")
	g.Expect(tmplAfter).To(Equal(tmplBefore), "the pod template is left alone")
}

// resetTemplates runs until the test ends as an operator that owns the
// Deployments names does: whenever their pod template's annotations are
// not what it wants (those they were created with), it writes them back.
func resetTemplates(t *testing.T, ns string, names ...string) {
	t.Helper()
	want := map[string]map[string]string{}
	for _, n := range names {
		want[n] = get(t, &appsv1.Deployment{ObjectMeta: fixture.Meta(ns, n)}).Spec.Template.Annotations
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			for _, n := range names {
				var d appsv1.Deployment
				if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, &d); err != nil {
					continue
				}
				if !maps.Equal(d.Spec.Template.Annotations, want[n]) {
					d.Spec.Template.Annotations = want[n]
					_ = k8s.Update(ctx, &d) // a conflict: next round
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
}

// TestEvictOperatorOwned: Deployments whose owner (an operator) resets
// their template's annotations on every update. With the annotation
// strategy the restart is undone: the mark is removed and the old pods
// keep running (what users of such operators report). With evict, every
// pod is replaced once per change, the template and ReplicaSets untouched.
func TestEvictOperatorOwned(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	cm := fixture.ConfigMap(ns, "shared", map[string]string{"k": "1"})
	byAnnotation := slowDeployment(ns, "by-annotation", fixture.EnvFrom("shared", ""), 3*time.Second)
	byEvict := slowDeployment(ns, "by-evict", fixture.EnvFrom("shared", ""), time.Second)
	byEvict.Annotations = map[string]string{restart.StrategyAnnotation: "evict"}
	for _, d := range []*appsv1.Deployment{byAnnotation, byEvict} {
		d.Spec.Replicas = ptr.To[int32](2)
	}
	create(t, cm, byAnnotation, byEvict)
	startWatcher(t, "watcher", ns) // the default: annotation
	for _, d := range []*appsv1.Deployment{byAnnotation, byEvict} {
		waitAdopted(t, d)
		waitRunning(t, d)
	}
	resetTemplates(t, ns, "by-annotation", "by-evict")
	g.Eventually(func() int { return len(runningPods(t, ns, "by-evict")) }, wait).Should(Equal(2))
	oldAnnotation := runningPods(t, ns, "by-annotation")
	rsEvict := replicaSetUIDs(t, ns, "by-evict")
	tmplEvict := get(t, byEvict).Spec.Template
	evicted := watchPods(t, ns, "by-evict")
	time.Sleep(time.Second) // the pods' creation second is past

	for i, v := range []string{"2", "3"} {
		old := runningPods(t, ns, "by-evict")
		setData(t, cm, "k", v)
		waitReplaced(t, ns, "by-evict", old)
		g.Eventually(func() int { return len(runningPods(t, ns, "by-evict")) }, wait).Should(Equal(2), "change %d", i+1)
		time.Sleep(time.Second)
	}
	seen, _ := evicted.Stop()
	g.Expect(seen).To(Equal(6), "2 pods, replaced once per change, twice")
	g.Expect(replicaSetUIDs(t, ns, "by-evict")).To(Equal(rsEvict), "no new ReplicaSet")
	g.Expect(get(t, byEvict).Spec.Template).To(Equal(tmplEvict), "the template is left alone")

	// The annotation strategy's restarts were written, and undone by the
	// operator.
	g.Expect(eventNotesOn(t, ns, "by-annotation", "Restarted")).NotTo(BeEmpty())
	g.Eventually(func() map[string]string { return get(t, byAnnotation).Spec.Template.Annotations }, wait).
		ShouldNot(HaveKey(plan.RestartAnnotation))
	g.Eventually(func() map[types.UID]bool { return runningPods(t, ns, "by-annotation") }, wait).Should(Equal(oldAnnotation),
		"the annotation strategy's restarts were undone: the old pods run")
}

// TestEvictDaemonSet: a DaemonSet restarted by evict gets its pod (one
// node) replaced once, with no new ControllerRevision and its template
// and generation unchanged.
func TestEvictDaemonSet(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	cm := fixture.ConfigMap(ns, "shared", map[string]string{"k": "1"})
	ds := fixture.DaemonSet(ns, "agent", fixture.EnvFrom("shared", ""))
	ds.Spec.Template.Annotations = map[string]string{cluster.ReadyDelayAnnotation: "1s"}
	create(t, cm, ds)
	startWatcher(t, "watcher", ns, "--restart-strategy=evict")
	waitAdopted(t, ds)
	g.Eventually(func() map[types.UID]bool { return runningPods(t, ns, "agent") }, wait).Should(And(HaveLen(1), Not(ContainElement(false))))
	before := get(t, ds).DeepCopy()
	var revs appsv1.ControllerRevisionList
	g.Expect(k8s.List(ctx, &revs, client.InNamespace(ns))).To(Succeed())
	revsBefore := len(revs.Items)
	old := runningPods(t, ns, "agent")
	pods := watchPods(t, ns, "agent")
	time.Sleep(time.Second) // the pod's creation second is past

	setData(t, cm, "k", "2")
	waitReplaced(t, ns, "agent", old)
	time.Sleep(3 * time.Second)
	seen, _ := pods.Stop()
	g.Expect(seen).To(Equal(2), "the pod replaced once")
	after := get(t, ds)
	g.Expect(after.Spec.Template).To(Equal(before.Spec.Template), "the pod template is left alone")
	g.Expect(after.Generation).To(Equal(before.Generation), "the generation is unchanged")
	g.Expect(k8s.List(ctx, &revs, client.InNamespace(ns))).To(Succeed())
	g.Expect(revs.Items).To(HaveLen(revsBefore), "no new ControllerRevision")
}
