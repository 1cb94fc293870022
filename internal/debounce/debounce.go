// Package debounce holds back the items of changed objects until their
// changes are quiet, so that a burst of edits is handled once.
package debounce

import (
	"sync"
	"time"
)

// Debouncer holds back the items of changed objects until their changes
// have been quiet for window, or until max has passed since the first change
// held, then adds them to the work queue: a burst of edits becomes one item,
// handled once, after the burst; a never-ending stream is still handled every
// max.
//
// It holds at most one entry per object, whatever the number of changes, and
// the queue dedups what it adds: memory stays flat under any number of
// changes, on a standby too (where nothing takes items off the queue).
type Debouncer[K comparable] struct {
	window, max time.Duration
	now         func() time.Time

	mu      sync.Mutex
	pending map[K]*held[K]
}

// held is one object's pending changes.
type held[K comparable] struct {
	first, due time.Time
	timer      *time.Timer
	q          Adder[K]
}

// Adder is the part of the work queue the debouncer uses.
type Adder[K comparable] interface{ Add(K) }

// New returns a Debouncer holding items until quiet for window, at most
// max after the first change (0: no bound).
func New[K comparable](window, max time.Duration) *Debouncer[K] {
	return &Debouncer[K]{window: window, max: max, now: time.Now, pending: map[K]*held[K]{}}
}

// Add holds req until its changes are quiet, then adds it to q.
func (d *Debouncer[K]) Add(req K, q Adder[K]) { d.AddHeld(req, q, 0) }

// AddHeld is Add, holding req at least hold after its first change (a
// ReloadPolicy's coalesce), quiet or not.
func (d *Debouncer[K]) AddHeld(req K, q Adder[K], hold time.Duration) {
	if d.window <= 0 && hold <= 0 {
		q.Add(req)
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	h := d.pending[req]
	if h == nil {
		h = &held[K]{first: now, q: q}
		d.pending[req] = h
	}
	h.due = now.Add(d.window)
	if d.max > 0 {
		h.due = minTime(h.due, h.first.Add(d.max))
	}
	if held := h.first.Add(hold); held.After(h.due) {
		h.due = held
	}
	if h.timer == nil {
		h.timer = time.AfterFunc(h.due.Sub(now), func() { d.fire(req) })
	}
}

// fire hands req to the queue if it is due, or waits again if a later change
// moved its due time.
func (d *Debouncer[K]) fire(req K) {
	d.mu.Lock()
	h := d.pending[req]
	if h == nil {
		d.mu.Unlock()
		return
	}
	if wait := h.due.Sub(d.now()); wait > 0 {
		h.timer = time.AfterFunc(wait, func() { d.fire(req) })
		d.mu.Unlock()
		return
	}
	delete(d.pending, req)
	d.mu.Unlock()
	h.q.Add(req)
}

// Len returns how many objects have changes held.
func (d *Debouncer[K]) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.pending)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
