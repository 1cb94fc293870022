package guard

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/watcher-dev/watcher/internal/object"
)

// Flaps finds ConfigMaps and Secrets that keep changing. A source that
// changes more than Threshold times within Window is flapping; it stops
// once it has been quiet for Quiet. Restarts caused by a flapping source
// are held until then, and a single rollout brings the workloads to its
// final content. Threshold 0 turns it off.
//
//	changes seen in the last Window    last change      state
//	at most Threshold                  any              not flapping
//	more than Threshold                less than Quiet  flapping (Observe says so once)
//	                                   ago
//	any                                Quiet ago        not flapping (Sweep says so once)
//
// It also remembers who wrote (the field managers of each change, see
// package attribution), for the messages: at most maxWriters names, the
// most recent, seen within Window.
type Flaps struct {
	Threshold     int
	Window, Quiet time.Duration

	mu  sync.Mutex
	src map[object.Ref]*flap
}

// maxWriters bounds the writers named per source.
const maxWriters = 4

type flap struct {
	times    []time.Time // changes in Window, oldest first, at most Threshold+1
	raw      time.Time   // the last write seen (Touch)
	writers  []writer    // most recent last
	flapping bool
}

type writer struct {
	name string
	at   time.Time
}

// NewFlaps returns a detector of more than threshold changes per window.
func NewFlaps(threshold int, window, quiet time.Duration) *Flaps {
	return &Flaps{Threshold: threshold, Window: window, Quiet: quiet, src: map[object.Ref]*flap{}}
}

// Touch records a write of the source id's data by writers at now, as the
// informer sees it: for the reaction time (LastChange) and the writers the
// messages name. It counts nothing: a burst of writes that the controller
// coalesces into one change is one change (Observe).
func (f *Flaps) Touch(id object.Ref, now time.Time, writers []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.src[id]
	if s == nil {
		s = &flap{}
		f.src[id] = s
	}
	s.raw = now
	for _, w := range writers {
		s.wrote(w, now)
	}
}

// Observe counts a change of the source id handled at now: the changes
// coalesced by the controller's debounce, of a source that workloads use.
// It returns a message when the source starts flapping with this change.
func (f *Flaps) Observe(id object.Ref, now time.Time) (started bool, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.src[id]
	if s == nil {
		s = &flap{raw: now}
		f.src[id] = s
	}
	if s.flapping && now.Sub(s.last()) >= f.Quiet {
		s.flapping = false
	}
	s.times = append(s.inWindow(now, f.Window), now)
	// Only the last Threshold+1 changes can make it flap.
	if keep := max(f.Threshold+1, 1); len(s.times) > keep {
		s.times = s.times[len(s.times)-keep:]
	}
	if f.Threshold <= 0 || s.flapping || len(s.times) <= f.Threshold {
		return false, ""
	}
	s.flapping = true
	return true, f.message(id, s, now)
}

// wrote adds or refreshes a writer, dropping the least recent beyond
// maxWriters.
func (s *flap) wrote(name string, now time.Time) {
	s.writers = slices.DeleteFunc(s.writers, func(w writer) bool { return w.name == name })
	s.writers = append(s.writers, writer{name, now})
	if len(s.writers) > maxWriters {
		s.writers = s.writers[1:]
	}
}

func (s *flap) last() time.Time {
	if len(s.times) == 0 {
		return time.Time{}
	}
	return s.times[len(s.times)-1]
}

// inWindow drops the change times older than window.
func (s *flap) inWindow(now time.Time, window time.Duration) []time.Time {
	i := 0
	for i < len(s.times) && !s.times[i].After(now.Add(-window)) {
		i++
	}
	return s.times[i:]
}

// Writers returns the writers of id seen within Window, sorted.
func (f *Flaps) Writers(id object.Ref, now time.Time) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.src[id]; s != nil {
		return s.names(now, f.Window)
	}
	return nil
}

func (s *flap) names(now time.Time, window time.Duration) []string {
	var out []string
	for _, w := range s.writers {
		if w.at.After(now.Add(-window)) {
			out = append(out, w.name)
		}
	}
	slices.Sort(out)
	return out
}

func (f *Flaps) message(id object.Ref, s *flap, now time.Time) string {
	return fmt.Sprintf("%s changed %d times in %s (after coalescing bursts) by %s; restarts held until it is quiet for %s",
		id, len(s.inWindow(now, f.Window)), short(f.Window), join(s.names(now, f.Window)), short(f.Quiet))
}

// Check implements Gate: a restart is held while any of its sources is
// flapping.
func (f *Flaps) Check(r Request) Verdict {
	if f.Threshold <= 0 || r.Released {
		return Verdict{}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, src := range r.Sources {
		s := f.src[src.Object]
		if s == nil || !s.flapping {
			continue
		}
		if until := s.last().Add(f.Quiet); r.Now.Before(until) {
			return Verdict{Hold: true, Reason: ReasonFlapping, Until: until, Message: f.message(src.Object, s, r.Now)}
		}
	}
	return Verdict{}
}

// LastChange returns when a change of id was last observed.
func (f *Flaps) LastChange(id object.Ref) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.src[id]; s != nil && !s.raw.IsZero() {
		return s.raw, true
	}
	return time.Time{}, false
}

// Sweep ends the flapping of sources quiet for Quiet, returned sorted, and
// forgets sources with no change in Window. It returns how many still
// flap.
func (f *Flaps) Sweep(now time.Time) (stopped []object.Ref, flapping int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, s := range f.src {
		if s.flapping && now.Sub(s.last()) >= f.Quiet {
			s.flapping = false
			stopped = append(stopped, id)
		}
		if s.flapping {
			flapping++
		} else if last := s.last(); now.Sub(last) > f.Window && now.Sub(s.raw) > f.Window {
			delete(f.src, id)
		}
	}
	slices.SortFunc(stopped, object.Compare)
	return stopped, flapping
}

// Len returns how many sources are remembered.
func (f *Flaps) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.src)
}

// join names managers for a message: "a", "a and b", "a, b and c".
func join(names []string) string {
	switch len(names) {
	case 0:
		return "unknown writers"
	case 1:
		return names[0]
	}
	return fmt.Sprintf("%s and %s", joinComma(names[:len(names)-1]), names[len(names)-1])
}

func joinComma(names []string) string {
	out := names[0]
	for _, n := range names[1:] {
		out += ", " + n
	}
	return out
}
