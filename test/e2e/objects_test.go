package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/cause"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/workload"
	"github.com/watcher-dev/watcher/test/observe"
)

var ctx = context.Background()

const wait = 60 * time.Second

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

// track creates w and records its rollouts until the test ends.
func track(t *testing.T, w client.Object) *observe.Tracker {
	t.Helper()
	c, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	tr, err := observe.Track(c, kube.RESTConfig(), w)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// setData sets key to value in a ConfigMap or Secret, retrying conflicts.
func setData(t *testing.T, obj client.Object, key, value string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			if o.Data == nil {
				o.Data = map[string]string{}
			}
			o.Data[key] = value
		case *corev1.Secret:
			if o.Data == nil {
				o.Data = map[string][]byte{}
			}
			o.Data[key] = []byte(value)
		}
		return k8s.Update(ctx, obj)
	})
	if err != nil {
		t.Fatalf("update %s: %v", obj.GetName(), err)
	}
}

func get[T client.Object](t *testing.T, obj T) T {
	t.Helper()
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatalf("get %s: %v", obj.GetName(), err)
	}
	return obj
}

// waitAdopted waits until watcher recorded w's hashes.
func waitAdopted(t *testing.T, w client.Object) {
	t.Helper()
	NewWithT(t).Eventually(func() string { return get(t, w).GetAnnotations()[plan.RecordAnnotation] }, wait, 50*time.Millisecond).
		ShouldNot(BeEmpty(), "%s not adopted", w.GetName())
}

func waitRollouts(t *testing.T, tr *observe.Tracker, n int) {
	t.Helper()
	NewWithT(t).Eventually(tr.Count, wait, 20*time.Millisecond).Should(Equal(n), "rollouts of %s", tr.Name)
}

func stayRollouts(t *testing.T, tr *observe.Tracker, n int, d time.Duration) {
	t.Helper()
	NewWithT(t).Consistently(tr.Count, d, 50*time.Millisecond).Should(Equal(n), "rollouts of %s", tr.Name)
}

// waitRunning waits until w's Pods are all Running and Ready, and all run
// its current pod template: what a user checks after a rollout.
func waitRunning(t *testing.T, w client.Object) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		cur := get(t, w)
		tmpl, err := workload.PodTemplate(cur)
		g.Expect(err).NotTo(HaveOccurred())
		want := tmpl.Annotations[plan.RestartAnnotation]
		var pods corev1.PodList
		g.Expect(k8s.List(ctx, &pods, client.InNamespace(w.GetNamespace()), client.MatchingLabels{"app": w.GetName()})).To(Succeed())
		g.Expect(pods.Items).NotTo(BeEmpty())
		for _, p := range pods.Items {
			g.Expect(p.DeletionTimestamp).To(BeNil(), "pod %s terminating", p.Name)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", p.Name)
			g.Expect(podReady(&p)).To(BeTrue(), "pod %s ready", p.Name)
			g.Expect(p.Annotations[plan.RestartAnnotation]).To(Equal(want), "pod %s runs the current template", p.Name)
		}
	}, wait, 200*time.Millisecond).Should(Succeed(), "pods of %s", w.GetName())
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitRestarted waits for the Event that says the workload name of ns was
// restarted (reason Restarted) with a note holding every one of subs.
func waitRestarted(t *testing.T, ns, name string, subs ...string) {
	t.Helper()
	waitEventOn(t, ns, name, cause.ReasonRestarted, subs...)
}

// waitEventOn waits for an Event of reason on the object name of ns whose
// note holds every one of subs.
func waitEventOn(t *testing.T, ns, name, reason string, subs ...string) {
	t.Helper()
	NewWithT(t).Eventually(func() []string {
		var list eventsv1.EventList
		if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Reason == reason && containsAll(e.Note, subs) {
				out = append(out, e.Note)
			}
		}
		return out
	}, wait, 50*time.Millisecond).ShouldNot(BeEmpty(), "no %s Event on %s/%s with %q", reason, ns, name, subs)
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// restartLines returns p's log lines that say a restart of a workload
// whose "Kind namespace/name" starts with workload: which process
// restarted is said only in its log.
func restartLines(p *proc, workload string) []string {
	return p.Logs.Matching("\tRestarted\t", `"workload": "`+workload)
}

// waitLog waits until p logged a line with every one of subs.
func waitLog(t *testing.T, p *proc, subs ...string) {
	t.Helper()
	NewWithT(t).Eventually(func() []string { return p.Logs.Matching(subs...) }, wait, 20*time.Millisecond).
		ShouldNot(BeEmpty(), "%s logged no line with %q", p.Name, subs)
}

func name(prefix string, i int) string { return fmt.Sprintf("%s-%d", prefix, i) }
