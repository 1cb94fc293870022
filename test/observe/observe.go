// Package observe watches workloads the way a user would, through the API
// server, and records every change of their pod templates. Tests use it to
// count rollouts: a Deployment's generation is no measure, since it also
// moves when annotations change.
package observe

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Rollout is one change of a pod template.
type Rollout struct {
	// At is when the watch delivered it.
	At time.Time
	// RestartedFor is the template's watcher.dev/restarted-for annotation.
	RestartedFor string
}

// Tracker records the rollouts of one workload.
type Tracker struct {
	Name string

	// namespace and name of the workload: the caller keeps using its
	// object, so the tracker keeps no reference to it.
	namespace, name string

	mu       sync.Mutex
	last     string
	rollouts []Rollout
}

// Track creates w and records its rollouts until ctx is done. It watches
// before it creates, so it sees every change, and watches again from where it
// was when a watch ends (an API server restart, a timeout).
func Track(ctx context.Context, cfg *rest.Config, w client.Object) (*Tracker, error) {
	kind, list, err := kindOf(w)
	if err != nil {
		return nil, err
	}
	c, err := client.NewWithWatch(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	tr := &Tracker{Name: kind + " " + w.GetNamespace() + "/" + w.GetName(), namespace: w.GetNamespace(), name: w.GetName()}
	first, err := tr.watch(ctx, c, list, "")
	if err != nil {
		return nil, err
	}
	if err := c.Create(ctx, w); err != nil {
		first.Stop()
		return nil, fmt.Errorf("create %s: %w", tr.Name, err)
	}
	go tr.follow(ctx, c, list, first)
	return tr, nil
}

func (tr *Tracker) watch(ctx context.Context, c client.WithWatch, list client.ObjectList, rv string) (watch.Interface, error) {
	opts := &client.ListOptions{
		Namespace:     tr.namespace,
		FieldSelector: fields.OneTermEqualSelector("metadata.name", tr.name),
		Raw:           &metav1.ListOptions{ResourceVersion: rv},
	}
	wi, err := c.Watch(ctx, list, opts)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", tr.Name, err)
	}
	return wi, nil
}

func (tr *Tracker) follow(ctx context.Context, c client.WithWatch, list client.ObjectList, wi watch.Interface) {
	rv := ""
	for {
		for ev := range wi.ResultChan() {
			if obj, ok := ev.Object.(client.Object); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				tr.observe(obj)
				rv = obj.GetResourceVersion()
			}
			if ev.Type == watch.Error {
				rv = "" // too old: start from the current state
			}
		}
		wi.Stop()
		for {
			if ctx.Err() != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
			var err error
			if wi, err = tr.watch(ctx, c, list, rv); err == nil {
				break
			}
		}
	}
}

func (tr *Tracker) observe(obj client.Object) {
	tmpl, err := workload.PodTemplate(obj)
	if err != nil {
		return
	}
	b, _ := json.Marshal(tmpl)
	sum := sha256.Sum256(b)
	h := string(sum[:])
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.last != "" && tr.last != h {
		tr.rollouts = append(tr.rollouts, Rollout{At: time.Now(), RestartedFor: tmpl.Annotations[plan.RestartAnnotation]})
	}
	tr.last = h
}

// Count returns how many times the pod template changed.
func (tr *Tracker) Count() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.rollouts)
}

// Rollouts returns the template changes seen so far.
func (tr *Tracker) Rollouts() []Rollout {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]Rollout(nil), tr.rollouts...)
}

func kindOf(w client.Object) (string, client.ObjectList, error) {
	k, ok := workload.Of(w)
	if !ok {
		return "", nil, fmt.Errorf("%T is not a workload", w)
	}
	return k.Name(), k.NewList(), nil
}
