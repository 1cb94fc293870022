package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// replacement follows the pods of the shared scenario's Deployments
// through one change, whatever the restart strategy (a new ReplicaSet, or
// evictions that leave the template alone): the pods present before the
// change are old, any other is new. For each Deployment (a pod's "app"
// label), with want replicas:
//
//	measure       is
//	unavailable   want minus its pods Ready and not terminating (0 at least)
//	started       an old pod is terminating or gone, or a new pod exists
//	done          no old pod is left but terminating ones, and want new
//	              pods are Ready and not terminating
//	rolling       started and not done
//
// Every pod event updates the peaks (of unavailable pods in one Deployment
// and in all, of Deployments rolling at once), so a short dip is not
// missed as it could be by polling. A pod created after the change is
// counted once, however many events it has: more new pods than want in a
// Deployment means a pod was replaced twice.
type replacement struct {
	want     int
	apps     []string
	old      map[types.UID]bool
	oldByApp map[string]int
	pods     map[types.UID]podView
	fresh    map[string]map[types.UID]bool // app -> new pods ever seen

	peakUnavailable    int // in one Deployment
	peakUnavailableAll int // in all at once
	peakRolling        int
	allDone            bool
}

// podView is what replacement knows of one pod.
type podView struct {
	app         string
	ready       bool
	terminating bool
}

// newReplacement starts following the Deployments apps of want replicas
// each, whose pods before the change are before.
func newReplacement(want int, apps []string, before []corev1.Pod) *replacement {
	r := &replacement{want: want, apps: apps, old: map[types.UID]bool{}, oldByApp: map[string]int{},
		pods: map[types.UID]podView{}, fresh: map[string]map[types.UID]bool{}}
	for i := range before {
		v := viewOf(&before[i])
		r.old[before[i].UID] = true
		r.oldByApp[v.app]++
		r.pods[before[i].UID] = v
	}
	r.observe()
	return r
}

func viewOf(p *corev1.Pod) podView {
	v := podView{app: p.Labels["app"], terminating: p.DeletionTimestamp != nil}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			v.ready = c.Status == corev1.ConditionTrue
		}
	}
	return v
}

// set records p as it is now.
func (r *replacement) set(p *corev1.Pod) {
	v := viewOf(p)
	r.pods[p.UID] = v
	if !r.old[p.UID] {
		if r.fresh[v.app] == nil {
			r.fresh[v.app] = map[types.UID]bool{}
		}
		r.fresh[v.app][p.UID] = true
	}
	r.observe()
}

// remove records that the pod uid is gone.
func (r *replacement) remove(uid types.UID) {
	delete(r.pods, uid)
	r.observe()
}

// appState is one Deployment's state, as the table of replacement says.
type appState struct {
	unavailable    int
	started, done  bool
	oldLeft, fresh int
}

// states returns the state of each Deployment.
func (r *replacement) states() map[string]appState {
	ready := map[string]int{}
	readyNew := map[string]int{}
	oldLeft := map[string]int{}
	oldLive := map[string]int{}
	started := map[string]bool{}
	for uid, p := range r.pods {
		live := p.ready && !p.terminating
		if live {
			ready[p.app]++
		}
		switch {
		case r.old[uid]:
			oldLeft[p.app]++
			if p.terminating {
				started[p.app] = true
			} else {
				oldLive[p.app]++
			}
		case live:
			readyNew[p.app]++
		}
	}
	out := make(map[string]appState, len(r.apps))
	for _, app := range r.apps {
		s := appState{unavailable: max(r.want-ready[app], 0), oldLeft: oldLeft[app], fresh: len(r.fresh[app])}
		s.started = started[app] || s.fresh > 0 || oldLeft[app] < r.oldByApp[app]
		s.done = oldLive[app] == 0 && readyNew[app] >= r.want
		out[app] = s
	}
	return out
}

// observe updates the peaks and whether every Deployment is done.
func (r *replacement) observe() {
	total, rolling, done := 0, 0, 0
	for _, s := range r.states() {
		total += s.unavailable
		r.peakUnavailable = max(r.peakUnavailable, s.unavailable)
		if s.started && !s.done {
			rolling++
		}
		if s.done {
			done++
		}
	}
	r.peakUnavailableAll = max(r.peakUnavailableAll, total)
	r.peakRolling = max(r.peakRolling, rolling)
	r.allDone = done == len(r.apps)
}

// replacementResult is what replacement measured.
type replacementResult struct {
	PeakUnavailable    int  `json:"peakUnavailablePerDeployment"`
	PeakUnavailableAll int  `json:"peakUnavailable"`
	PeakRolling        int  `json:"peakConcurrentRollouts"`
	NewPods            int  `json:"newPods"`
	ReplacedOnce       bool `json:"everyPodReplacedOnce"`
	Done               bool `json:"done"`
}

// result returns the peaks so far, the new pods, and whether each
// Deployment has exactly want of them.
func (r *replacement) result() replacementResult {
	res := replacementResult{PeakUnavailable: r.peakUnavailable, PeakUnavailableAll: r.peakUnavailableAll,
		PeakRolling: r.peakRolling, ReplacedOnce: true, Done: r.allDone}
	for _, app := range r.apps {
		n := len(r.fresh[app])
		res.NewPods += n
		if n != r.want {
			res.ReplacedOnce = false
		}
	}
	return res
}

// podWatch feeds a replacement from one watch of the benchmark
// namespace's pods.
type podWatch struct {
	mu   sync.Mutex
	r    *replacement
	done time.Time // when an event first made every Deployment done
	err  error     // why the watch ended early, if it did
}

// startPodWatch lists the pods (the old ones) and watches them from the
// list's resourceVersion until ctx ends.
func startPodWatch(ctx context.Context, cs kubernetes.Interface, want int, apps []string) (*podWatch, error) {
	pods := cs.CoreV1().Pods(benchNamespace)
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	pw := &podWatch{r: newReplacement(want, apps, list.Items)}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return pods.Watch(ctx, o)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watch pods: %w", err)
	}
	go pw.run(rw)
	return pw, nil
}

func (pw *podWatch) run(w *watchtools.RetryWatcher) {
	for ev := range w.ResultChan() {
		pw.mu.Lock()
		switch ev.Type {
		case watch.Added, watch.Modified:
			if p, ok := ev.Object.(*corev1.Pod); ok {
				pw.r.set(p)
			}
		case watch.Deleted:
			if p, ok := ev.Object.(*corev1.Pod); ok {
				pw.r.remove(p.UID)
			}
		case watch.Error:
			pw.err = fmt.Errorf("watch pods: %w", apierrors.FromObject(ev.Object))
			w.Stop()
		}
		if pw.r.allDone && pw.done.IsZero() {
			pw.done = time.Now()
		}
		pw.mu.Unlock()
	}
}

// doneAt returns when every Deployment was first seen done.
func (pw *podWatch) doneAt() time.Time {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	return pw.done
}

// result returns what the watch measured so far, or why it ended.
func (pw *podWatch) result() (replacementResult, error) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	return pw.r.result(), pw.err
}
