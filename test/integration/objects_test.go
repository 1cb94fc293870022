package integration

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// env is the cluster as test/fixture's helpers reach it; TestMain sets
// its client.
var env = &fixture.Env{Wait: wait, Poll: 10 * time.Millisecond}

// The helpers every test package shares.
var (
	create        = env.Create
	waitAdopted   = env.WaitAdopted
	waitRollouts  = env.WaitRollouts
	waitRestarted = env.WaitRestarted
	waitEvent     = env.WaitEvent
	events        = env.Events
)

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
	return fixture.Get(t, k8s, obj)
}

// stayRollouts checks that the tracked workload stays at n rollouts for a
// while.
func stayRollouts(t *testing.T, tr *observe.Tracker, n int) {
	t.Helper()
	env.StayRollouts(t, tr, n, quiet)
}

// restartLogs returns the log lines of w that say a restart of a workload
// whose "Kind namespace/name" starts with workload.
func restartLogs(w *instance, workload string) []string {
	return w.logs.Lines(`"msg"="Restarted"`, `"workload"="`+workload)
}

// waitLog waits until w has logged a line containing every one of subs.
func waitLog(t *testing.T, w *instance, subs ...string) {
	t.Helper()
	NewWithT(t).Eventually(func() []string { return w.logs.Lines(subs...) }, wait, 10*time.Millisecond).
		ShouldNot(BeEmpty(), "no log line with %q", subs)
}
