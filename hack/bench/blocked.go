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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/plan"
)

// The blocked-eviction scenario (--blocked N): N Deployments of one
// replica, restarted by watcher's evict strategy, each with a
// PodDisruptionBudget of maxUnavailable 0, so that every eviction is
// refused for ever, share one ConfigMap, changed once. Every restart is
// written at once (--max-concurrent-rollouts=0) and none can finish. It
// counts the controller's API requests per second in a window --after the
// change (the leader), then stops the controller, starts it again (a new
// process, a new leader) and counts them again in a window --restarted-after
// its start: what blocked restarts cost once they have run for a while,
// and whether a restart of watcher starts polling them again. Lease
// renewals and Events are counted apart (Lease renewals are the same with
// no Deployment at all; each Deployment gets one Event when its rollout
// times out, --rollout-timeout after its restart), and the total with them
// is printed too: a window that starts after the rollout timeout shows both
// near zero.
const blockedPhaseChange, blockedPhaseLeader, blockedPhaseGap, blockedPhaseRestart, blockedPhaseRestarted = "change", "leader", "gap", "restart", "restarted"

// blockedResult is what the blocked-eviction scenario measures.
type blockedResult struct {
	Workloads      int    `json:"workloads"`
	ControllerCmd  string `json:"controllerCmd"`
	RolloutTimeout string `json:"rolloutTimeout"`
	After          string `json:"after"`
	RestartedAfter string `json:"restartedAfter"`
	Window         string `json:"window"`
	// Restarted is how many Deployments carry watcher's restart state
	// after the change.
	Restarted int `json:"restarted"`
	// PerSecond is the controller's requests per second in each window,
	// Leases and Events left out: "leader" and "restarted".
	PerSecond map[string]float64 `json:"perSecond"`
	// PerSecondAll is the same with Leases and Events.
	PerSecondAll map[string]float64 `json:"perSecondAll"`
	// Requests are the controller's requests by phase (blockedPhase*),
	// then by "verb resource".
	Requests requestCounts `json:"requests"`
}

func runBlocked(ctx context.Context, o options, log *progress) (_ *blockedResult, err error) {
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
	r := &blockedResult{Workloads: o.Shared, ControllerCmd: strings.Join(argv, " "), RolloutTimeout: o.RolloutTimeout,
		After: o.After.String(), RestartedAfter: o.RestartedAfter.String(), Window: o.Window.String()}
	log.printf("waiting until every Deployment is available")
	if err := pollUntil(ctx, 10*time.Minute, func() (bool, error) { return sharedAvailable(ctx, cs, o) }); err != nil {
		return nil, err
	}
	start := func() (*controllerProcess, error) {
		log.printf("starting controller: %s", r.ControllerCmd)
		c, err := startController(argv, []string{"KUBECONFIG=" + kubeconfig}, filepath.Join(outDir, "controller.log"))
		if err != nil {
			return nil, err
		}
		if _, err := c.waitReady(ctx, readyURL, o.ReadyTimeout); err != nil {
			c.stop()
			return nil, err
		}
		return c, nil
	}
	ctrl, err := start()
	if err != nil {
		return nil, err
	}
	defer func() { ctrl.stop() }()
	log.printf("waiting until every Deployment is adopted")
	if err := pollUntil(ctx, 10*time.Minute, func() (bool, error) {
		n, err := blockedCount(ctx, cs, plan.RecordAnnotation)
		return n == o.Shared, err
	}); err != nil {
		return nil, err
	}
	if err := sleep(ctx, o.SettleQuiet); err != nil {
		return nil, err
	}
	changed := time.Now()
	patch := fmt.Sprintf(`{"data":{"ca.crt":%q}}`, changed.String())
	if _, err := cs.CoreV1().ConfigMaps(benchNamespace).Patch(ctx, "shared", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return nil, fmt.Errorf("change the shared ConfigMap: %w", err)
	}
	log.printf("ConfigMap changed; waiting until every Deployment is restarted")
	if err := pollUntil(ctx, 10*time.Minute, func() (bool, error) {
		n, err := blockedCount(ctx, cs, guard.StateAnnotation)
		r.Restarted = n
		return n == o.Shared, err
	}); err != nil {
		return nil, err
	}
	phases := []phase{{Name: blockedPhaseChange, Start: changed}, {Name: blockedPhaseLeader, Start: changed.Add(o.After)}}
	log.printf("every Deployment restarted, every eviction refused; counting the leader's requests %s after the change, for %s", o.After, o.Window)
	if err := sleepUntil(ctx, changed.Add(o.After+o.Window)); err != nil {
		return nil, err
	}
	phases = append(phases, phase{Name: blockedPhaseGap, Start: time.Now()})
	ctrl.stop()
	restarted := time.Now()
	if ctrl, err = start(); err != nil {
		return nil, err
	}
	phases = append(phases, phase{Name: blockedPhaseRestart, Start: restarted}, phase{Name: blockedPhaseRestarted, Start: restarted.Add(o.RestartedAfter)})
	log.printf("controller restarted; counting its requests %s after its start, for %s", o.RestartedAfter, o.Window)
	end := restarted.Add(o.RestartedAfter + o.Window)
	if err := sleepUntil(ctx, end); err != nil {
		return nil, err
	}
	ctrl.stop()
	f, err := os.Open(kube.AuditLogPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if r.Requests, err = countAudit(f, controllerUser, phases, end); err != nil {
		return nil, err
	}
	r.PerSecond, r.PerSecondAll = map[string]float64{}, map[string]float64{}
	for _, p := range []string{blockedPhaseLeader, blockedPhaseRestarted} {
		r.PerSecond[p] = float64(work(r.Requests[p])) / o.Window.Seconds()
		r.PerSecondAll[p] = float64(total(r.Requests[p])) / o.Window.Seconds()
	}
	return r, nil
}

// work counts the requests of counts but Lease renewals and Events.
func work(counts map[string]int) int {
	n := 0
	for k, v := range counts {
		if !strings.HasSuffix(k, " leases") && !strings.HasSuffix(k, " events") {
			n += v
		}
	}
	return n
}

// blockedCount counts the Deployments that carry the annotation key.
func blockedCount(ctx context.Context, cs kubernetes.Interface, key string) (int, error) {
	list, err := cs.AppsV1().Deployments(benchNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range list.Items {
		if d.Annotations[key] != "" {
			n++
		}
	}
	return n, nil
}

// sleepUntil waits until t, or until ctx is done.
func sleepUntil(ctx context.Context, t time.Time) error { return sleep(ctx, time.Until(t)) }

// writeBlocked prints the result: the requests per second of each window,
// then the requests of each phase by verb.
func writeBlocked(w io.Writer, r *blockedResult) error {
	var b strings.Builder
	timeout := r.RolloutTimeout
	if timeout == "" {
		timeout = "watcher's default"
	}
	fmt.Fprintf(&b, "scenario                  %d Deployments of 1 replica, restart strategy evict, each with a PodDisruptionBudget of maxUnavailable 0 "+
		"(every eviction refused), share one ConfigMap, changed once; rollout timeout %s\n", r.Workloads, timeout)
	fmt.Fprintf(&b, "controller                %s\n", r.ControllerCmd)
	fmt.Fprintf(&b, "restarted                 %d of %d\n", r.Restarted, r.Workloads)
	fmt.Fprintf(&b, "requests/s, leader        %.3f  (from %s after the change, for %s; Leases and Events left out; %.3f with them)\n",
		r.PerSecond[blockedPhaseLeader], r.After, r.Window, r.PerSecondAll[blockedPhaseLeader])
	fmt.Fprintf(&b, "requests/s, restarted     %.3f  (from %s after the new process started, for %s; Leases and Events left out; %.3f with them)\n",
		r.PerSecond[blockedPhaseRestarted], r.RestartedAfter, r.Window, r.PerSecondAll[blockedPhaseRestarted])
	phases := []struct{ name, what string }{
		{blockedPhaseChange, "from the change to the leader's window"},
		{blockedPhaseLeader, "the leader's window"},
		{blockedPhaseRestart, "from the restart to the restarted leader's window"},
		{blockedPhaseRestarted, "the restarted leader's window"},
	}
	for _, p := range phases {
		counts := r.Requests[p.name]
		fmt.Fprintf(&b, "API requests of the controller, %s: %d, %d without Leases and Events\n", p.what, total(counts), work(counts))
		keys := make([]string, 0, len(counts))
		for k := range counts {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "  %-46s  %d\n", k, counts[k])
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func total(counts map[string]int) int {
	n := 0
	for _, v := range counts {
		n += v
	}
	return n
}
