package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/watcher-dev/watcher/internal/cluster"
	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/plan"
)

// The shared-ConfigMap scenario (--shared N): N Deployments of one replica
// use one ConfigMap (a CA bundle, a feature-flag file), their pods become
// Ready --ready-delay after they are scheduled, and the ConfigMap changes
// once. It needs real rollouts, so the whole control plane runs (the
// deployment controller, the scheduler, kwok). It reports the time from the
// write to every rollout done, the peak of rollouts in progress at once
// (as kubectl rollout status sees them, polled every wavePoll), and the
// controller's API requests during the change.
const wavePoll = 100 * time.Millisecond

// wavesResult is what the shared-ConfigMap scenario measures.
type wavesResult struct {
	Workloads     int            `json:"workloads"`
	ReadyDelay    string         `json:"readyDelay"`
	ControllerCmd string         `json:"controllerCmd"`
	RollAll       float64        `json:"rollAllSeconds"`
	Peak          int            `json:"peakConcurrentRollouts"`
	RolledOnce    bool           `json:"everyWorkloadRolledOnce"`
	Requests      map[string]int `json:"requests"`
	RSSPeakMiB    float64        `json:"rssPeakMiB"`
}

func runWaves(ctx context.Context, o options, log *progress) (_ *wavesResult, err error) {
	outDir, err := makeOutDir(o.OutDir)
	if err != nil {
		return nil, err
	}
	log.printf("logs go to %s; starting the whole control plane", outDir)
	clusterLog := funcr.New(func(_, args string) { log.printf("cluster: %s", args) }, funcr.Options{})
	kube, err := cluster.Start(logr.NewContext(ctx, clusterLog), cluster.Options{
		BinDir: o.BinDir, AuditLog: true, Nodes: 1, PodsPerNode: max(1000, 2*o.Shared+10),
		Users: []cluster.User{{Name: controllerUser, Groups: []string{"system:masters"}}},
	})
	if err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	defer func() { err = errors.Join(err, kube.Stop()) }()
	cs, err := benchClient(kube.RESTConfig())
	if err != nil {
		return nil, err
	}
	if err := createShared(ctx, cs, o.Shared, o.ReadyDelay); err != nil {
		return nil, err
	}
	kubeconfig, err := kube.UserKubeconfig(controllerUser)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	argv, readyURL, err := o.controllerCommand(port, kubeconfig)
	if err != nil {
		return nil, err
	}
	r := &wavesResult{Workloads: o.Shared, ReadyDelay: o.ReadyDelay.String(), ControllerCmd: strings.Join(argv, " ")}
	log.printf("starting controller: %s", r.ControllerCmd)
	ctrl, err := startController(argv, []string{"KUBECONFIG=" + kubeconfig}, filepath.Join(outDir, "controller.log"))
	if err != nil {
		return nil, err
	}
	defer ctrl.stop()
	if _, err := ctrl.waitReady(ctx, readyURL, o.ReadyTimeout); err != nil {
		return nil, err
	}
	log.printf("waiting until every Deployment is adopted and available")
	if err := pollUntil(ctx, 5*time.Minute, func() (bool, error) { return sharedSettled(ctx, cs, o.Shared, false) }); err != nil {
		return nil, err
	}
	start := time.Now()
	patch := fmt.Sprintf(`{"data":{"ca.crt":%q}}`, start.String())
	if _, err := cs.CoreV1().ConfigMaps(benchNamespace).Patch(ctx, "shared", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return nil, fmt.Errorf("change the shared ConfigMap: %w", err)
	}
	log.printf("ConfigMap changed; following the rollouts")
	peak := 0
	err = pollUntil(ctx, 30*time.Minute, func() (bool, error) {
		n, done, err := rollingNow(ctx, cs)
		peak = max(peak, n)
		if err != nil || !done {
			return false, err
		}
		return sharedSettled(ctx, cs, o.Shared, true)
	})
	if err != nil {
		return nil, err
	}
	r.RollAll, r.Peak = time.Since(start).Seconds(), peak
	end := time.Now()
	if s, err := readProc(ctrl.pid()); err == nil {
		r.RSSPeakMiB = float64(s.Peak) / (1 << 20)
	}
	ctrl.stop()
	r.RolledOnce, err = rolledOnce(ctx, cs, o.Shared)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(kube.AuditLogPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	counts, err := countAudit(f, controllerUser, []phase{{Name: "change", Start: start}}, end)
	if err != nil {
		return nil, err
	}
	r.Requests = counts["change"]
	return r, nil
}

// benchNamespace holds the benchmark's objects.
const benchNamespace = "default"

// createShared creates the ConfigMap and n Deployments that use it.
func createShared(ctx context.Context, cs kubernetes.Interface, n int, delay time.Duration) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: benchNamespace}, Data: map[string]string{"ca.crt": "0"}}
	if _, err := cs.CoreV1().ConfigMaps(benchNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the shared ConfigMap: %w", err)
	}
	for i := range n {
		name := workloadName(i)
		labels := map[string]string{"app": name}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: benchNamespace},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{cluster.ReadyDelayAnnotation: delay.String()}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app",
						EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "shared"}}}}}}},
				},
			},
		}
		if _, err := cs.AppsV1().Deployments(benchNamespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
	}
	return nil
}

// sharedSettled reports whether all n Deployments carry a record (and,
// with restarted, watcher's restart mark) and are done rolling.
func sharedSettled(ctx context.Context, cs kubernetes.Interface, n int, restarted bool) (bool, error) {
	list, err := cs.AppsV1().Deployments(benchNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	ok := 0
	for i := range list.Items {
		d := &list.Items[i]
		if d.Annotations[plan.RecordAnnotation] == "" || guard.Rolling(d) || d.Status.AvailableReplicas < 1 {
			continue
		}
		if restarted && guard.Mark(&d.Spec.Template) == "" {
			continue
		}
		ok++
	}
	return ok == n, nil
}

// rollingNow counts the Deployments watcher restarted whose rollout is not
// done; done is true when every restarted one is.
func rollingNow(ctx context.Context, cs kubernetes.Interface) (n int, done bool, err error) {
	list, err := cs.AppsV1().Deployments(benchNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, false, err
	}
	for i := range list.Items {
		if d := &list.Items[i]; guard.Mark(&d.Spec.Template) != "" && guard.Rolling(d) {
			n++
		}
	}
	return n, n == 0, nil
}

// rolledOnce reports whether every Deployment has exactly two
// ReplicaSets: its first, and one rollout.
func rolledOnce(ctx context.Context, cs kubernetes.Interface, n int) (bool, error) {
	list, err := cs.AppsV1().ReplicaSets(benchNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	per := map[string]int{}
	for _, rs := range list.Items {
		per[rs.Labels["app"]]++
	}
	for i := range n {
		if per[workloadName(i)] != 2 {
			return false, nil
		}
	}
	return true, nil
}

// pollUntil calls cond every wavePoll until it is true, fails, or timeout.
func pollUntil(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not done after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wavePoll):
		}
	}
}

// writeWaves prints the result as a table.
func writeWaves(w io.Writer, r *wavesResult) error {
	var b strings.Builder
	fmt.Fprintf(&b, "scenario                 %d Deployments of 1 replica share one ConfigMap, changed once; pods Ready %s after scheduling\n", r.Workloads, r.ReadyDelay)
	fmt.Fprintf(&b, "controller               %s\n", r.ControllerCmd)
	fmt.Fprintf(&b, "time to roll all         %.2f s\n", r.RollAll)
	fmt.Fprintf(&b, "peak rollouts at once    %d\n", r.Peak)
	fmt.Fprintf(&b, "every workload rolled once  %v\n", r.RolledOnce)
	fmt.Fprintf(&b, "RSS peak                 %.1f MiB\n", r.RSSPeakMiB)
	fmt.Fprintf(&b, "API requests of the controller during the change\n")
	keys := make([]string, 0, len(r.Requests))
	for k := range r.Requests {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "  %-30s %d\n", k, r.Requests[k])
	}
	_, err := io.WriteString(w, b.String())
	return err
}
