package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/watcher-dev/watcher/internal/cluster"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/plan"
)

// The pinned scenario (--pinned): the cost of a pinned restart beside an
// unpinned one, measured in one run by one watcher started with
// --pinning. --workloads Deployments (replicas 0) are unpinned and as many
// are annotated watcher.dev/pin: "true"; each reads a ConfigMap of its
// own through envFrom and a Secret of its own through a volume, both of
// --size bytes. The chart's MutatingAdmissionPolicy and its binding are
// installed as the chart renders them with pinning.enabled (the real helm
// CLI), so watcher turns pinning on. The whole control plane runs: the
// deployment controller makes the ReplicaSets that snapshots are handed
// to. After adoption, --changes ConfigMaps of unpinned Deployments are
// rewritten at --rate (phase "unpinned"); once every restart is seen and
// the controller is quiet, as many of pinned ones (phase "pinned"), and
// the phase lasts until every snapshot is owned by a ReplicaSet. Per
// phase it reports the controller's requests by verb and resource, in all
// and per restart, the time from the ConfigMap write to the template
// change seen, and the snapshots made and their bytes.
const pinPhaseAdopt, pinPhaseUnpinned, pinPhasePinned = "adopt", "unpinned", "pinned"

// pinnedWorkloadName and the config names of workload i of the pinned
// scenario: pinned tells the two sets apart.
func pinnedWorkloadName(pinned bool, i int) string { return pinnedPrefix(pinned) + workloadName(i) }
func pinnedConfigName(pinned bool, i int) string   { return pinnedPrefix(pinned) + configName(i) }
func pinnedSecretName(pinned bool, i int) string {
	return pinnedPrefix(pinned) + fmt.Sprintf("sec-%05d", i)
}

func pinnedPrefix(pinned bool) string {
	if pinned {
		return "pin-"
	}
	return ""
}

// pinnedWorkload returns Deployment i of the pinned scenario: replicas 0,
// its ConfigMap through envFrom, its Secret through a volume, annotated
// watcher.dev/pin: "true" if pinned.
func pinnedWorkload(pinned bool, i int) *appsv1.Deployment {
	d := newWorkload(pinnedWorkloadName(pinned, i), []ref{
		{secret: false, name: pinnedConfigName(pinned, i)},
		{secret: true, name: pinnedSecretName(pinned, i)},
	}, 0)
	if pinned {
		d.Annotations = map[string]string{pin.Annotation: "true"}
	}
	return d
}

// pinnedObjects returns every object of the pinned scenario with n
// workloads a set, configs first.
func pinnedObjects(n, size int) []runtime.Object {
	var objs []runtime.Object
	for _, pinned := range []bool{false, true} {
		for i := range n {
			objs = append(objs, newConfig(false, pinnedConfigName(pinned, i), size), newConfig(true, pinnedSecretName(pinned, i), size))
		}
	}
	for _, pinned := range []bool{false, true} {
		for i := range n {
			objs = append(objs, pinnedWorkload(pinned, i))
		}
	}
	return objs
}

func runPinned(ctx context.Context, o options, log *progress) (_ *pinnedResult, err error) {
	outDir, err := makeOutDir(o.OutDir)
	if err != nil {
		return nil, err
	}
	log.printf("logs go to %s", outDir)
	policy, err := renderPinningPolicy()
	if err != nil {
		return nil, err
	}
	log.printf("starting the whole control plane")
	clusterLog := funcr.New(func(_, args string) { log.printf("cluster: %s", args) }, funcr.Options{})
	kube, err := cluster.Start(logr.NewContext(ctx, clusterLog), cluster.Options{
		BinDir: o.BinDir, AuditLog: true,
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
	if err := applyObjects(ctx, kube, policy); err != nil {
		return nil, err
	}
	log.printf("installed the chart's MutatingAdmissionPolicy and its binding")
	if err := createPinned(ctx, cs, o, log); err != nil {
		return nil, err
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	tw, err := startTemplateWatch(watchCtx, cs)
	if err != nil {
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
	r := &pinnedResult{Workloads: o.Workloads, Changes: o.Changes, Rate: o.Rate, Size: o.Size, ControllerCmd: strings.Join(argv, " ")}
	phases := []phase{{Name: pinPhaseAdopt, Start: time.Now()}}
	log.printf("starting controller: %s", r.ControllerCmd)
	ctrl, err := startController(argv, []string{"KUBECONFIG=" + kubeconfig}, filepath.Join(outDir, "controller.log"))
	if err != nil {
		return nil, err
	}
	defer ctrl.stop()
	if _, err := ctrl.waitReady(ctx, readyURL, o.ReadyTimeout); err != nil {
		return nil, err
	}
	log.printf("waiting until every Deployment is adopted")
	if err := pollUntil(ctx, o.SettleTimeout, func() (bool, error) {
		n, err := countAnnotated(ctx, cs, namespace, plan.RecordAnnotation)
		return n == 2*o.Workloads, err
	}); err != nil {
		return nil, err
	}
	if err := sleep(ctx, o.SettleQuiet); err != nil {
		return nil, err
	}

	for _, pinned := range []bool{false, true} {
		name := pinPhaseUnpinned
		if pinned {
			name = pinPhasePinned
		}
		from := time.Now()
		phases = append(phases, phase{Name: name, Start: from})
		made, err := changePinned(ctx, cs, o, pinned, log)
		if err != nil {
			return nil, err
		}
		missing, err := waitAllSeen(ctx, tw, made, from, o.Drain)
		if err != nil {
			return nil, err
		}
		if missing > 0 {
			log.printf("%s: %d restarts still missing after %s", name, missing, o.Drain)
		}
		if pinned {
			log.printf("waiting until every snapshot is owned by a ReplicaSet")
			if err := pollUntil(ctx, o.Drain, func() (bool, error) {
				st, err := listSnapshots(ctx, cs)
				return st.Objects > 0 && st.OwnedByReplicaSets == st.Objects, err
			}); err != nil {
				log.printf("snapshots not all handed over after %s: %v", o.Drain, err)
			}
		}
		if err := sleep(ctx, o.SettleQuiet); err != nil { // late doubles, late requests
			return nil, err
		}
		seen, _, err := tw.snapshot()
		if err != nil {
			return nil, err
		}
		out := evaluate(made, seen, from, time.Now())
		snaps, err := listSnapshots(ctx, cs)
		if err != nil {
			return nil, err
		}
		r.Phases = append(r.Phases, pinnedPhase{Name: name, Latency: newLatency(summarize(out.Controller)), Snapshots: snaps.minus(r.lastSnapshots()),
			Correctness: correctness{Expected: out.Expected, Seen: out.Seen, Missed: out.Missed, Doubled: out.Doubled,
				MissedWorkloads: out.MissedWorkloads, DoubledWorkloads: out.DoubledWorkloads}})
	}
	end := time.Now()
	ctrl.stop()
	stopWatch()
	if err := copyFile(kube.AuditLogPath, filepath.Join(outDir, "audit.log")); err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(outDir, "audit.log"))
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	defer f.Close()
	counts, err := countAudit(f, controllerUser, phases, end)
	if err != nil {
		return nil, err
	}
	for i := range r.Phases {
		r.Phases[i].Requests = counts[r.Phases[i].Name]
	}
	return r, nil
}

// createPinned creates the namespace and the objects of pinnedObjects,
// createParallelism at a time.
func createPinned(ctx context.Context, cs kubernetes.Interface, o options, log *progress) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", namespace, err)
	}
	objs := pinnedObjects(o.Workloads, o.Size)
	log.printf("creating %d objects", len(objs))
	work := make(chan runtime.Object)
	errs := make(chan error, createParallelism)
	var wg sync.WaitGroup
	for range createParallelism {
		wg.Go(func() {
			for obj := range work {
				if err := create(ctx, cs, obj); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var err error
send:
	for _, obj := range objs {
		select {
		case work <- obj:
		case err = <-errs:
			break send
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	return errors.Join(err, <-errs)
}

// changePinned rewrites the ConfigMaps of the first o.Changes workloads of
// one set, at o.Rate, each in its own goroutine at its due time, and
// returns the restarts they call for.
func changePinned(ctx context.Context, cs kubernetes.Interface, o options, pinned bool, log *progress) ([]applied, error) {
	log.printf("changing %d ConfigMaps of %s Deployments at %g/s", o.Changes, map[bool]string{false: "unpinned", true: "pinned"}[pinned], o.Rate)
	began := time.Now()
	var mu sync.Mutex
	var made []applied
	var errs []error
	var wg sync.WaitGroup
	for k := range o.Changes {
		if err := sleepUntil(ctx, began.Add(o.Scenario.At(k, false))); err != nil {
			break
		}
		wg.Go(func() {
			patch, err := configPatch(false, o.Size, 1)
			if err == nil {
				_, err = cs.CoreV1().ConfigMaps(namespace).Patch(ctx, pinnedConfigName(pinned, k), types.MergePatchType, patch, metav1.PatchOptions{})
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("patch configmap %s: %w", pinnedConfigName(pinned, k), err))
				return
			}
			made = append(made, applied{Workload: pinnedWorkloadName(pinned, k), Accepted: time.Now()})
		})
	}
	wg.Wait()
	return made, errors.Join(append(errs, ctx.Err())...)
}

// countAnnotated counts the Deployments of ns that carry the annotation key.
func countAnnotated(ctx context.Context, cs kubernetes.Interface, ns, key string) (int, error) {
	list, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
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

// listSnapshots lists the snapshots (pin.SnapshotLabel) of the namespace.
func listSnapshots(ctx context.Context, cs kubernetes.Interface) (snapshotStats, error) {
	sel := metav1.ListOptions{LabelSelector: pin.SnapshotLabel + "=true"}
	cms, err := cs.CoreV1().ConfigMaps(namespace).List(ctx, sel)
	if err != nil {
		return snapshotStats{}, fmt.Errorf("list snapshot configmaps: %w", err)
	}
	secs, err := cs.CoreV1().Secrets(namespace).List(ctx, sel)
	if err != nil {
		return snapshotStats{}, fmt.Errorf("list snapshot secrets: %w", err)
	}
	return countSnapshots(cms.Items, secs.Items), nil
}
