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
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/watcher-dev/watcher/internal/cluster"
	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/plan"
)

// The shared-ConfigMap scenario (--shared N): N Deployments of --replicas
// pods (one by default) use one ConfigMap (a CA bundle, a feature-flag
// file), each with a PodDisruptionBudget of maxUnavailable 1 with --pdb,
// their pods become Ready --ready-delay after they are scheduled, and the
// ConfigMap changes once. It needs real rollouts, so the whole control
// plane runs (the deployment controller, the disruption controller, the
// scheduler, kwok). It follows the pods with a watch (replacement), so it
// measures any restart strategy alike, a new ReplicaSet or evictions, and
// reports the time from the write to every pod replaced and Ready, the
// peaks of unavailable pods and of rollouts in progress at once, and the
// controller's API requests during the change, in all and per restart.
const wavePoll = 100 * time.Millisecond

// wavesResult is what the shared-ConfigMap scenario measures.
type wavesResult struct {
	Workloads     int     `json:"workloads"`
	Replicas      int     `json:"replicas"`
	PDB           bool    `json:"pdb"`
	ReadyDelay    string  `json:"readyDelay"`
	ControllerCmd string  `json:"controllerCmd"`
	RollAll       float64 `json:"rollAllSeconds"`
	replacementResult
	NewReplicaSets int            `json:"newReplicaSets"`
	Requests       map[string]int `json:"requests"`
	// InstallWrites are the writes of every user (Leases and Events left
	// out) from the controller's start until every Deployment is adopted:
	// the controller's and the other controllers' reactions.
	InstallWrites map[string]int `json:"installWrites"`
	RSSPeakMiB    float64        `json:"rssPeakMiB"`
}

func runWaves(ctx context.Context, o options, log *progress) (_ *wavesResult, err error) {
	outDir, err := makeOutDir(o.OutDir)
	if err != nil {
		return nil, err
	}
	log.printf("logs go to %s", outDir)
	kube, cs, err := startShared(ctx, o, log)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, kube.Stop()) }()
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
	r := &wavesResult{Workloads: o.Shared, Replicas: o.Replicas, PDB: o.PDB, ReadyDelay: o.ReadyDelay.String(),
		ControllerCmd: strings.Join(argv, " ")}
	// The Deployments roll out before the controller starts, so that the
	// writes counted at install are the controller's and their reactions.
	log.printf("waiting until every Deployment is available")
	if err := pollUntil(ctx, 5*time.Minute, func() (bool, error) { return sharedAvailable(ctx, cs, o) }); err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(o.SettleQuiet):
	}
	installStart := time.Now()
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
	if err := pollUntil(ctx, 5*time.Minute, func() (bool, error) { return sharedSettled(ctx, cs, o) }); err != nil {
		return nil, err
	}
	select { // the reactions to the last adoption
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(o.SettleQuiet):
	}
	installEnd := time.Now()
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	apps := make([]string, o.Shared)
	for i := range apps {
		apps[i] = workloadName(i)
	}
	pw, err := startPodWatch(watchCtx, cs, o.Replicas, apps)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	patch := fmt.Sprintf(`{"data":{"ca.crt":%q}}`, start.String())
	if _, err := cs.CoreV1().ConfigMaps(benchNamespace).Patch(ctx, "shared", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return nil, fmt.Errorf("change the shared ConfigMap: %w", err)
	}
	log.printf("ConfigMap changed; following the pods")
	stopProgress := log.every(10*time.Second, func() string {
		res, _ := pw.result()
		return fmt.Sprintf("%d of %d new pods; at most %d Deployments rolling at once", res.NewPods, o.Shared*o.Replicas, res.PeakRolling)
	})
	err = pollUntil(ctx, 30*time.Minute, func() (bool, error) {
		res, err := pw.result()
		return res.Done, err
	})
	stopProgress()
	if err != nil {
		return nil, err
	}
	r.RollAll = pw.doneAt().Sub(start).Seconds()
	// A restart done twice would show after the first: wait a moment.
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(o.SettleQuiet):
	}
	end := time.Now()
	if r.replacementResult, err = pw.result(); err != nil {
		return nil, err
	}
	if s, err := readProc(ctrl.pid()); err == nil {
		r.RSSPeakMiB = float64(s.Peak) / (1 << 20)
	}
	ctrl.stop()
	if r.NewReplicaSets, err = newReplicaSets(ctx, cs, o.Shared); err != nil {
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
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	if r.InstallWrites, err = countWrites(f, installStart, installEnd); err != nil {
		return nil, err
	}
	return r, nil
}

// startShared starts the whole control plane, audited, with the
// controller's user, and creates the shared scenario's objects.
func startShared(ctx context.Context, o options, log *progress) (_ *cluster.Cluster, _ kubernetes.Interface, err error) {
	log.printf("starting the whole control plane")
	clusterLog := funcr.New(func(_, args string) { log.printf("cluster: %s", args) }, funcr.Options{})
	kube, err := cluster.Start(logr.NewContext(ctx, clusterLog), cluster.Options{
		BinDir: o.BinDir, AuditLog: true, AuditAdmin: true, Nodes: 1, PodsPerNode: max(1000, 2*o.Shared*o.Replicas+10),
		Users: []cluster.User{{Name: controllerUser, Groups: []string{"system:masters"}}},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("start control plane: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, kube.Stop())
		}
	}()
	cs, err := benchClient(kube.RESTConfig())
	if err != nil {
		return nil, nil, err
	}
	if err := createShared(ctx, cs, o); err != nil {
		return nil, nil, err
	}
	return kube, cs, nil
}

// sharedAvailable reports whether all o.Shared Deployments have all their
// replicas available, adopted or not.
func sharedAvailable(ctx context.Context, cs kubernetes.Interface, o options) (bool, error) {
	list, err := cs.AppsV1().Deployments(benchNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	ok := 0
	for _, d := range list.Items {
		if d.Status.ObservedGeneration == d.Generation && int(d.Status.AvailableReplicas) >= o.Replicas {
			ok++
		}
	}
	return ok == o.Shared, nil
}

// benchNamespace holds the benchmark's objects.
const benchNamespace = "default"

// createShared creates the ConfigMap and o.Shared Deployments that use it,
// each with a PodDisruptionBudget if o.PDB (of maxUnavailable 0 in the
// blocked-eviction scenario).
func createShared(ctx context.Context, cs kubernetes.Interface, o options) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: benchNamespace}, Data: map[string]string{"ca.crt": "0"}}
	if _, err := cs.CoreV1().ConfigMaps(benchNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the shared ConfigMap: %w", err)
	}
	maxUnavailable := int32(1)
	if o.Blocked > 0 {
		maxUnavailable = 0 // every eviction refused
	}
	for i := range o.Shared {
		name := workloadName(i)
		labels := map[string]string{"app": name}
		selector := &metav1.LabelSelector{MatchLabels: labels}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: benchNamespace},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(int32(o.Replicas)),
				Selector: selector,
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{cluster.ReadyDelayAnnotation: o.ReadyDelay.String()}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app",
						EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "shared"}}}}}}},
				},
			},
		}
		if _, err := cs.AppsV1().Deployments(benchNamespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
		if !o.PDB {
			continue
		}
		pdb := &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: benchNamespace},
			Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(maxUnavailable)), Selector: selector},
		}
		if _, err := cs.PolicyV1().PodDisruptionBudgets(benchNamespace).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create the PodDisruptionBudget of %s: %w", name, err)
		}
	}
	return nil
}

// sharedSettled reports whether all o.Shared Deployments carry a record,
// are done rolling with all their replicas available, and, with o.PDB,
// whether their budgets allow a disruption (the disruption controller
// has seen the pods Ready).
func sharedSettled(ctx context.Context, cs kubernetes.Interface, o options) (bool, error) {
	list, err := cs.AppsV1().Deployments(benchNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	ok := 0
	for i := range list.Items {
		d := &list.Items[i]
		if d.Annotations[plan.RecordAnnotation] != "" && !guard.Rolling(d) && int(d.Status.AvailableReplicas) >= o.Replicas {
			ok++
		}
	}
	if ok != o.Shared || !o.PDB {
		return ok == o.Shared, nil
	}
	pdbs, err := cs.PolicyV1().PodDisruptionBudgets(benchNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	allowing := 0
	for _, p := range pdbs.Items {
		if p.Status.DisruptionsAllowed >= 1 {
			allowing++
		}
	}
	return allowing == o.Shared, nil
}

// newReplicaSets counts the ReplicaSets of the n Deployments beyond their
// first: one per Deployment for a strategy that changes the template,
// none for evict.
func newReplicaSets(ctx context.Context, cs kubernetes.Interface, n int) (int, error) {
	list, err := cs.AppsV1().ReplicaSets(benchNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	return len(list.Items) - n, nil
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

// writeWaves prints the result as a table: the API requests in all and
// per restarted Deployment.
func writeWaves(w io.Writer, r *wavesResult) error {
	var b strings.Builder
	pdb := ""
	if r.PDB {
		pdb = " with a PodDisruptionBudget (maxUnavailable 1) each"
	}
	fmt.Fprintf(&b, "scenario                  %d Deployments of %d replica(s)%s share one ConfigMap, changed once; pods Ready %s after scheduling\n",
		r.Workloads, r.Replicas, pdb, r.ReadyDelay)
	fmt.Fprintf(&b, "controller                %s\n", r.ControllerCmd)
	fmt.Fprintf(&b, "time to roll all          %.2f s  (every pod replaced and Ready)\n", r.RollAll)
	fmt.Fprintf(&b, "peak rollouts at once     %d\n", r.PeakRolling)
	fmt.Fprintf(&b, "peak unavailable pods     %d in all, %d in one Deployment\n", r.PeakUnavailableAll, r.PeakUnavailable)
	fmt.Fprintf(&b, "every pod replaced once   %v  (%d new pods for %d)\n", r.ReplacedOnce, r.NewPods, r.Workloads*r.Replicas)
	fmt.Fprintf(&b, "new ReplicaSets           %d\n", r.NewReplicaSets)
	fmt.Fprintf(&b, "RSS peak                  %.1f MiB\n", r.RSSPeakMiB)
	fmt.Fprintf(&b, "API requests of the controller during the change  all   per restart\n")
	keys := make([]string, 0, len(r.Requests))
	for k := range r.Requests {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "  %-46s  %-5d %.2f\n", k, r.Requests[k], float64(r.Requests[k])/float64(max(r.Workloads, 1)))
	}
	total := 0
	for _, n := range r.InstallWrites {
		total += n
	}
	fmt.Fprintf(&b, "writes at install, every user (Leases, Events left out)  all   per workload\n")
	fmt.Fprintf(&b, "  %-54s  %-5d %.2f\n", "in all", total, float64(total)/float64(max(r.Workloads, 1)))
	keys = keys[:0]
	for k := range r.InstallWrites {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "  %-54s  %-5d %.2f\n", k, r.InstallWrites[k], float64(r.InstallWrites[k])/float64(max(r.Workloads, 1)))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
