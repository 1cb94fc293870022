package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// templateWatch follows every Deployment of the benchmark's namespace with
// one watch and records when each one's pod template changes: the moment
// the benchmark receives the event whose spec.template hashes differently
// from the one before. Status and metadata changes (a controller recording
// what it saw) are not template changes.
type templateWatch struct {
	mu      sync.Mutex
	hashes  map[string]uint64      // workload -> hash of its pod template
	changes map[string][]time.Time // workload -> when its template changed
	events  int                    // watch events received
	err     error                  // why the watch ended early, if it did
	done    chan struct{}
}

// startTemplateWatch lists the Deployments, remembers their templates and
// watches from the list's resourceVersion until ctx ends.
func startTemplateWatch(ctx context.Context, cs kubernetes.Interface) (*templateWatch, error) {
	tw := &templateWatch{hashes: map[string]uint64{}, changes: map[string][]time.Time{}, done: make(chan struct{})}
	deployments := cs.AppsV1().Deployments(namespace)
	var rv string
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := deployments.List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list deployments: %w", err)
		}
		if rv == "" {
			rv = list.ResourceVersion // every page is of the first one's snapshot
		}
		for i := range list.Items {
			tw.hashes[list.Items[i].Name] = templateHash(&list.Items[i])
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, rv, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return deployments.Watch(ctx, o)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watch deployments: %w", err)
	}
	go tw.run(rw)
	return tw, nil
}

// run records the events of w until it ends.
func (tw *templateWatch) run(w *watchtools.RetryWatcher) {
	defer close(tw.done)
	for ev := range w.ResultChan() {
		seen := time.Now()
		switch ev.Type {
		case watch.Added, watch.Modified:
			if d, ok := ev.Object.(*appsv1.Deployment); ok {
				tw.observe(d.Name, templateHash(d), seen)
			}
		case watch.Deleted:
			if d, ok := ev.Object.(*appsv1.Deployment); ok {
				tw.mu.Lock()
				delete(tw.hashes, d.Name)
				tw.mu.Unlock()
			}
		case watch.Error:
			tw.mu.Lock()
			tw.err = fmt.Errorf("watch deployments: %w", apierrors.FromObject(ev.Object))
			tw.mu.Unlock()
			w.Stop()
		}
	}
}

// observe records a template change of name if its hash changed. A
// workload seen for the first time is not a change.
func (tw *templateWatch) observe(name string, hash uint64, seen time.Time) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	tw.events++
	old, known := tw.hashes[name]
	tw.hashes[name] = hash
	if known && old != hash {
		tw.changes[name] = append(tw.changes[name], seen)
	}
}

// snapshot returns a copy of the template changes so far, and the number of
// events and the watch's error, if any.
func (tw *templateWatch) snapshot() (map[string][]time.Time, int, error) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	changes := make(map[string][]time.Time, len(tw.changes))
	for name, times := range tw.changes {
		changes[name] = append([]time.Time(nil), times...)
	}
	return changes, tw.events, tw.err
}

// templateHash hashes the protobuf encoding of the pod template, which is
// deterministic (map keys are sorted).
func templateHash(d *appsv1.Deployment) uint64 {
	data, err := d.Spec.Template.Marshal()
	if err != nil {
		return 0 // cannot happen for a decoded object
	}
	h := fnv.New64a()
	_, _ = h.Write(data)
	return h.Sum64()
}
