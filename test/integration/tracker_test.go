package integration

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"reflect"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/workload"
)

// tracker counts the rollouts of one workload: the changes of its pod
// template, seen through a watch on the API server. (The generation is no
// measure: a Deployment's also moves when its annotations change.)
type tracker struct {
	name string

	mu        sync.Mutex
	templates []string // hash of each distinct template, in order
}

// track creates w and starts counting its rollouts until the test ends.
func track(t *testing.T, w client.Object) *tracker {
	t.Helper()
	kind, list := kindOf(t, w)
	wc, err := client.NewWithWatch(restConfig, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	create(t, w)
	watcher, err := wc.Watch(ctx, list, client.InNamespace(w.GetNamespace()),
		client.MatchingFields{"metadata.name": w.GetName()})
	if err != nil {
		t.Fatal(err)
	}
	tr := &tracker{name: kind + " " + w.GetName()}
	tr.observe(w)
	go func() {
		defer watcher.Stop()
		for ev := range watcher.ResultChan() {
			if ev.Type == watch.Added || ev.Type == watch.Modified {
				tr.observe(ev.Object.(client.Object))
			}
		}
	}()
	return tr
}

func (tr *tracker) observe(obj client.Object) {
	tmpl, err := workload.PodTemplate(obj)
	if err != nil {
		return
	}
	b, _ := json.Marshal(tmpl)
	sum := sha256.Sum256(b)
	h := string(sum[:])
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if n := len(tr.templates); n == 0 || tr.templates[n-1] != h {
		tr.templates = append(tr.templates, h)
	}
}

// Rollouts returns how many times the pod template changed.
func (tr *tracker) Rollouts() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return max(len(tr.templates)-1, 0)
}

func kindOf(t *testing.T, w client.Object) (string, client.ObjectList) {
	t.Helper()
	for _, k := range workload.Kinds {
		if reflect.TypeOf(k.New()) == reflect.TypeOf(w) {
			return k.Name, k.NewList()
		}
	}
	t.Fatalf("%T is not a workload", w)
	return "", nil
}
