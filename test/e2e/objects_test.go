package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/workload"
	"github.com/watcher-dev/watcher/test/fixture"
	"github.com/watcher-dev/watcher/test/observe"
)

var ctx = context.Background()

const wait = 60 * time.Second

// env is the cluster as test/fixture's helpers reach it; TestMain sets
// its client.
var env = &fixture.Env{Wait: wait, Poll: 50 * time.Millisecond}

// The helpers every test package shares.
var (
	create        = env.Create
	waitAdopted   = env.WaitAdopted
	waitRollouts  = env.WaitRollouts
	stayRollouts  = env.StayRollouts
	waitRestarted = env.WaitRestarted
	waitEvent     = env.WaitEvent
)

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

// get returns the current state of obj from the API server.
func get[T client.Object](t *testing.T, obj T) T {
	t.Helper()
	return fixture.Get(t, k8s, obj)
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
