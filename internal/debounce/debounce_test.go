package debounce

import (
	"sync"
	"testing"
	"time"

	"github.com/watcher-dev/watcher/internal/object"
)

type recorded struct {
	mu   sync.Mutex
	reqs []object.Ref
}

func (r *recorded) Add(req object.Ref) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
}

func (r *recorded) count(req object.Ref) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, x := range r.reqs {
		if x == req {
			n++
		}
	}
	return n
}

// TestDebounceBurst: a burst of changes to one object becomes one item,
// added only once the burst is quiet; another object's item is its own.
func TestDebounceBurst(t *testing.T) {
	q := &recorded{}
	d := New[object.Ref](100*time.Millisecond, time.Hour)
	a, b := object.Ref{Kind: "ConfigMap", Namespace: "ns", Name: "a"}, object.Ref{Kind: "Secret", Namespace: "ns", Name: "a"}
	for range 10 {
		d.Add(a, q)
		d.Add(b, q)
		time.Sleep(20 * time.Millisecond)
	}
	if n := q.count(a); n != 0 {
		t.Fatalf("%d items added while the burst went on", n)
	}
	if d.Len() != 2 {
		t.Fatalf("%d objects held, want 2", d.Len())
	}
	deadline := time.Now().Add(5 * time.Second)
	for (q.count(a) == 0 || q.count(b) == 0) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if q.count(a) != 1 || q.count(b) != 1 || d.Len() != 0 {
		t.Fatalf("after the burst: %d and %d items, %d held; want 1, 1, 0", q.count(a), q.count(b), d.Len())
	}
}

// TestDebounceMax: a never-ending stream of changes is still handled, every
// max, and holds one entry whatever the number of changes.
func TestDebounceMax(t *testing.T) {
	q := &recorded{}
	d := New[object.Ref](time.Hour, 100*time.Millisecond)
	a := object.Ref{Kind: "ConfigMap", Namespace: "ns", Name: "a"}
	deadline := time.Now().Add(5 * time.Second)
	for q.count(a) < 2 && time.Now().Before(deadline) {
		d.Add(a, q)
		if d.Len() > 1 {
			t.Fatalf("%d entries held for one object", d.Len())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if q.count(a) < 2 {
		t.Fatal("a never-ending stream was never handled")
	}
}

// TestDebounceOff: no window adds at once.
func TestDebounceOff(t *testing.T) {
	q := &recorded{}
	a := object.Ref{Kind: "ConfigMap", Namespace: "ns", Name: "a"}
	New[object.Ref](0, 0).Add(a, q)
	if q.count(a) != 1 {
		t.Fatal("not added at once")
	}
}
