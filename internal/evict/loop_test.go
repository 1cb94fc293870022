package evict

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// afterQueue records what is added to it with AddAfter.
type afterQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	added map[string]time.Duration
}

func (q afterQueue) AddAfter(item string, d time.Duration) { q.added[item] = d }

// TestLoop: a look scheduled before the Loop starts, or in 0, is not
// enqueued; one scheduled once started is, after its delay.
func TestLoop(t *testing.T) {
	var l Loop[string]
	q := afterQueue{added: map[string]time.Duration{}}
	l.Schedule("before start", time.Second)
	if err := l.Start(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	l.Schedule("none", 0)
	l.Schedule("web", 2*time.Second)
	if want := map[string]time.Duration{"web": 2 * time.Second}; len(q.added) != 1 || q.added["web"] != want["web"] {
		t.Errorf("added %v, want %v", q.added, want)
	}
}
