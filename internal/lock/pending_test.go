package lock

import (
	"context"
	"testing"
	"time"

	"github.com/watcher-dev/watcher/internal/object"
)

// fakeLock records how it was released.
type fakeLock struct{ released chan bool }

func (l *fakeLock) Release(_ context.Context, done bool) error { l.released <- done; return nil }

// sharedLocker is any locker but Local.
type sharedLocker struct{ Local }

// TestPending: in a shared lock mode, a change whose users are held
// keeps its lock and is taken again without asking the locker; a newer
// version of the object releases the older one's lock as done; the lease
// mode keeps nothing.
func TestPending(t *testing.T) {
	if NewPending(Local{}) != nil {
		t.Fatal("the local locker keeps locks")
	}
	p := NewPending(sharedLocker{})
	req := object.Ref{Kind: "ConfigMap", Namespace: "shop", Name: "cfg"}
	if l, _, _ := p.Take(req, "v1"); l != nil {
		t.Fatal("a lock taken before any was kept")
	}
	l1 := &fakeLock{released: make(chan bool, 1)}
	p.Keep(req, "v1", l1)
	if l, outcome, _ := p.Take(req, "v1"); l != l1 || outcome != Acquired {
		t.Fatalf("take = %v, %v; want the kept lock", l, outcome)
	}
	p.Keep(req, "v1", l1)
	if l, _, _ := p.Take(req, "v2"); l != nil {
		t.Fatal("the lock of v1 handed out for v2")
	}
	select {
	case done := <-l1.released:
		if !done {
			t.Error("the superseded lock was released as not done")
		}
	case <-time.After(5 * time.Second):
		t.Error("the superseded lock was never released")
	}
	p.Keep(req, "v2", l1)
	p.Drop(req)
	if l, _, _ := p.Take(req, "v2"); l != nil {
		t.Error("a dropped lock handed out")
	}
}

// TestPendingGivenUpOnStop: when watcher stops, the kept locks are
// given up, not marked done, so another replica takes their changes at
// once; a lock kept after that is given up at once.
func TestPendingGivenUpOnStop(t *testing.T) {
	p := NewPending(sharedLocker{})
	req := object.Ref{Kind: "ConfigMap", Namespace: "shop", Name: "cfg"}
	l1 := &fakeLock{released: make(chan bool, 1)}
	p.Keep(req, "v1", l1)
	ctx, stop := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	go func() { ended <- p.Start(ctx) }()
	stop()
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
	select {
	case done := <-l1.released:
		if done {
			t.Error("the kept lock was marked done")
		}
	default:
		t.Error("the kept lock was not given up")
	}
	if l, _, _ := p.Take(req, "v1"); l != nil {
		t.Error("a lock given up is handed out")
	}
	l2 := &fakeLock{released: make(chan bool, 1)}
	p.Keep(req, "v2", l2)
	select {
	case done := <-l2.released:
		if done {
			t.Error("a lock kept while stopping was marked done")
		}
	default:
		t.Error("a lock kept while stopping was kept")
	}
}
