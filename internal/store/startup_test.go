package store

import (
	"runtime/debug"
	"testing"
)

// TestCollectOften: the garbage collector's target is lowered while any
// store fills, set back when the last one has synced, and left alone when
// it is lower already.
func TestCollectOften(t *testing.T) {
	orig := debug.SetGCPercent(100)
	defer debug.SetGCPercent(orig)
	gcPercent := func() int { p := debug.SetGCPercent(-1); debug.SetGCPercent(p); return p }

	a := collectOften()
	b := collectOften()
	if p := gcPercent(); p != startupGCPercent {
		t.Fatalf("while filling: GOGC %d, want %d", p, startupGCPercent)
	}
	a()
	a() // twice: counted once
	if p := gcPercent(); p != startupGCPercent {
		t.Errorf("one store still filling: GOGC %d, want %d", p, startupGCPercent)
	}
	b()
	if p := gcPercent(); p != 100 {
		t.Errorf("after: GOGC %d, want 100", p)
	}

	debug.SetGCPercent(10)
	c := collectOften()
	if p := gcPercent(); p != 10 {
		t.Errorf("lower already: GOGC %d, want 10", p)
	}
	c()
	if p := gcPercent(); p != 10 {
		t.Errorf("after, lower already: GOGC %d, want 10", p)
	}
}
