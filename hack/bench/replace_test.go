package main

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// benchPod returns a pod of app, Ready or not, terminating or not.
func benchPod(uid, app string, ready, terminating bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid), Labels: map[string]string{"app": app}}}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: status}}
	if terminating {
		p.DeletionTimestamp = &metav1.Time{}
	}
	return p
}

func TestReplacement(t *testing.T) {
	before := func() []corev1.Pod {
		return []corev1.Pod{*benchPod("a1", "a", true, false), *benchPod("a2", "a", true, false), *benchPod("b1", "b", true, false), *benchPod("b2", "b", true, false)}
	}

	t.Run("evictions, one at a time", func(t *testing.T) {
		g := NewWithT(t)
		r := newReplacement(2, []string{"a", "b"}, before())
		g.Expect(r.result()).To(Equal(replacementResult{ReplacedOnce: false}))

		r.set(benchPod("a1", "a", true, true)) // evicted
		g.Expect(r.result().PeakUnavailable).To(Equal(1))
		g.Expect(r.result().PeakRolling).To(Equal(1))
		r.remove("a1")
		r.set(benchPod("a3", "a", false, false)) // its replacement, not Ready yet
		r.set(benchPod("b1", "b", true, true))   // b starts too
		r.set(benchPod("a3", "a", true, false))
		r.set(benchPod("a2", "a", true, true))
		r.remove("a2")
		r.remove("b1")
		r.set(benchPod("a4", "a", true, false)) // a is done
		r.set(benchPod("b3", "b", true, false))
		g.Expect(r.result().Done).To(BeFalse(), "b2 is old and not terminating")
		r.set(benchPod("b2", "b", false, false)) // old, not Ready: unavailable
		r.remove("b2")
		r.set(benchPod("b4", "b", true, false))

		g.Expect(r.result()).To(Equal(replacementResult{
			PeakUnavailable: 1, PeakUnavailableAll: 2, PeakRolling: 2,
			NewPods: 4, ReplacedOnce: true, Done: true,
		}))
	})

	t.Run("a surge: a new ReplicaSet's pods before the old ones go", func(t *testing.T) {
		g := NewWithT(t)
		r := newReplacement(2, []string{"a"}, before()[:2])
		r.set(benchPod("a3", "a", false, false))
		g.Expect(r.result().PeakRolling).To(Equal(1), "a new pod starts the rollout")
		r.set(benchPod("a3", "a", true, false))
		r.set(benchPod("a1", "a", true, true))
		r.set(benchPod("a4", "a", false, false))
		r.set(benchPod("a4", "a", true, false))
		g.Expect(r.result().Done).To(BeFalse(), "a2 is still live")
		r.set(benchPod("a2", "a", true, true))
		g.Expect(r.result()).To(Equal(replacementResult{NewPods: 2, ReplacedOnce: true, Done: true, PeakRolling: 1}),
			"old pods terminating count as gone; nothing was unavailable")
	})

	t.Run("a pod replaced twice", func(t *testing.T) {
		g := NewWithT(t)
		r := newReplacement(1, []string{"a"}, before()[:1])
		r.remove("a1")
		r.set(benchPod("a2", "a", true, false))
		r.set(benchPod("a2", "a", true, true)) // evicted again
		r.remove("a2")
		r.set(benchPod("a3", "a", true, false))
		g.Expect(r.result()).To(Equal(replacementResult{
			PeakUnavailable: 1, PeakUnavailableAll: 1, PeakRolling: 1, NewPods: 2, ReplacedOnce: false, Done: true,
		}))
	})
}
