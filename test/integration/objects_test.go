package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/cause"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/test/fixture"
	"github.com/watcher-dev/watcher/test/observe"
)

var ctx = context.Background()

const (
	wait = 20 * time.Second
	// quiet is how long a test watches for a restart that must not come,
	// after it has seen watcher handle the change. Without coalescing a
	// restart follows the change within milliseconds.
	quiet = time.Second
)

// Builders of the objects the tests create.
var (
	meta        = fixture.Meta
	podSpec     = fixture.PodSpec
	envFrom     = fixture.EnvFrom
	deployment  = fixture.Deployment
	statefulSet = fixture.StatefulSet
	daemonSet   = fixture.DaemonSet
	configMap   = fixture.ConfigMap
	secret      = fixture.Secret
)

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

// edit reads obj, applies change and writes it back, retrying conflicts.
func edit[T client.Object](t *testing.T, obj T, change func(T)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change(obj)
		return k8s.Update(ctx, obj)
	})
	if err != nil {
		t.Fatalf("update %s: %v", obj.GetName(), err)
	}
}

func setConfigMap(t *testing.T, cm *corev1.ConfigMap, key, value string) {
	t.Helper()
	edit(t, cm, func(cm *corev1.ConfigMap) {
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[key] = value
	})
}

func setSecret(t *testing.T, s *corev1.Secret, key, value string) {
	t.Helper()
	edit(t, s, func(s *corev1.Secret) {
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		s.Data[key] = []byte(value)
	})
}

// fetch returns the current state of obj from the API server.
func fetch[T client.Object](t *testing.T, obj T) T {
	t.Helper()
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatalf("get %s: %v", obj.GetName(), err)
	}
	return obj
}

// waitAdopted waits until watcher recorded w's hashes.
func waitAdopted(t *testing.T, w client.Object) {
	t.Helper()
	NewWithT(t).Eventually(func() string {
		return fetch(t, w).GetAnnotations()[plan.RecordAnnotation]
	}, wait, 10*time.Millisecond).ShouldNot(BeEmpty(), "workload %s not adopted", w.GetName())
}

// waitRollouts waits until the tracked workload has been rolled n times.
func waitRollouts(t *testing.T, tr *observe.Tracker, n int) {
	t.Helper()
	NewWithT(t).Eventually(tr.Count, wait, 10*time.Millisecond).Should(Equal(n), "rollouts of %s", tr.Name)
}

// stayRollouts checks that the tracked workload stays at n rollouts for a
// while.
func stayRollouts(t *testing.T, tr *observe.Tracker, n int) {
	t.Helper()
	NewWithT(t).Consistently(tr.Count, quiet, 20*time.Millisecond).Should(Equal(n), "rollouts of %s", tr.Name)
}

// waitLog waits until w has logged a line containing every one of subs.
// waitRestarted waits for the Event that says the workload name of ns was
// restarted (reason Restarted) with a note holding every one of subs.
func waitRestarted(t *testing.T, ns, name string, subs ...string) {
	t.Helper()
	waitEvent(t, ns, name, cause.ReasonRestarted, subs...)
}

// waitEvent waits for an Event of reason on the object name of ns whose
// note holds every one of subs.
func waitEvent(t *testing.T, ns, name, reason string, subs ...string) {
	t.Helper()
	NewWithT(t).Eventually(func() []string {
		var out []string
		for _, n := range events(t, ns, name, reason) {
			if containsAll(n, subs) {
				out = append(out, n)
			}
		}
		return out
	}, wait, 20*time.Millisecond).ShouldNot(BeEmpty(), "no %s Event on %s/%s with %q", reason, ns, name, subs)
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// restartLogs returns the log lines of w that say a restart of a workload
// whose "Kind namespace/name" starts with workload.
func restartLogs(w *instance, workload string) []string {
	return w.logs.Lines(`"msg"="Restarted"`, `"workload"="`+workload)
}

func waitLog(t *testing.T, w *instance, subs ...string) {
	t.Helper()
	NewWithT(t).Eventually(func() []string { return w.logs.Lines(subs...) }, wait, 10*time.Millisecond).
		ShouldNot(BeEmpty(), "no log line with %q", subs)
}
