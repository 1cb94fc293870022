package csi

import (
	"maps"
	"slices"
	"sync"

	"github.com/watcher-dev/watcher/internal/object"
)

// seen is what one status said when last observed.
type seen struct {
	class   string
	objects map[string]string
	digest  string
	// seq orders the statuses written while watched (live): 0 for those
	// listed at start-up, increasing otherwise.
	seq uint64
	// created is when the status was created (to the second): its pod's
	// first mount.
	created int64
	// workload is the workload of its pod, once filed.
	workload object.Ref
	filed    bool
	// over, name and pod say how the status is over the limits, for the
	// Event on its workload.
	over      Over
	name, pod string
}

// slot is one class of one workload.
type slot struct {
	workload object.Ref
	class    string
}

// tracker keeps what the statuses say per workload and class, and which
// versions are current (see the package comment).
type tracker struct {
	mu       sync.Mutex
	seq      uint64
	statuses map[string]*seen
	// slots holds the keys of the statuses filed under each slot.
	slots map[slot]map[string]bool
	// classes holds the classes of each workload's slots.
	classes map[object.Ref]map[string]bool
	// latest is, per slot, the latest status written while watched, kept
	// after the status is deleted (its pod restarted first).
	latest map[slot]seen
	// sent is, per slot, the digest of the current versions last handed to
	// the controller.
	sent map[slot]string
	// told is, per slot, the Over last reported in an Event on the
	// workload; logged, per status, the Over last logged.
	told   map[slot]Over
	logged map[string]Over
}

func newTracker() *tracker {
	return &tracker{statuses: map[string]*seen{}, slots: map[slot]map[string]bool{}, classes: map[object.Ref]map[string]bool{}, latest: map[slot]seen{}, sent: map[slot]string{}, told: map[slot]Over{}, logged: map[string]Over{}}
}

// observe records what the status key says as its event arrives; live is
// false for the statuses listed at start-up. It returns whether the
// versions are new for the status (a metadata-only write is not).
func (t *tracker) observe(key string, s *Status, live bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	prev := t.statuses[key]
	if prev != nil && prev.digest == s.Digest {
		return false
	}
	next := &seen{class: s.Class, objects: s.Objects, digest: s.Digest, created: s.CreationTimestamp.Unix(), over: s.Over, name: s.Name, pod: s.Pod}
	if live {
		t.seq++
		next.seq = t.seq
	}
	if prev != nil && prev.class == s.Class {
		next.workload, next.filed = prev.workload, prev.filed
	}
	t.statuses[key] = next
	return true
}

// filed tells whether the status key is filed under its workload.
func (t *tracker) filed(key string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.statuses[key]
	return s == nil || s.filed
}

// file files the status key under the workload w and returns the rotation
// of w and its class when the current versions differ from those last
// handed to the controller (sent: hand it over).
func (t *tracker) file(key string, w object.Ref) (Rotation, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.statuses[key]
	if s == nil {
		return Rotation{}, false
	}
	s.workload, s.filed = w, true
	sl := slot{w, s.class}
	if t.slots[sl] == nil {
		t.slots[sl] = map[string]bool{}
		if t.classes[w] == nil {
			t.classes[w] = map[string]bool{}
		}
		t.classes[w][s.class] = true
	}
	t.slots[sl][key] = true
	if s.seq > 0 && s.seq > t.latest[sl].seq {
		t.latest[sl] = *s
	}
	return t.rotation(sl)
}

// rotation returns the rotation of sl when its current versions are not
// those sent; the caller holds mu.
func (t *tracker) rotation(sl slot) (Rotation, bool) {
	cur, ok := t.current(sl)
	if !ok || t.sent[sl] == cur.digest {
		return Rotation{}, false
	}
	t.sent[sl] = cur.digest
	return Rotation{Workload: sl.workload, Class: sl.class, Digest: cur.digest}, true
}

// forget drops the status key (deleted, or its pod belongs to no
// workload): when no status of its slot is left, the slot is forgotten.
func (t *tracker) forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.statuses[key]
	delete(t.statuses, key)
	if s == nil || !s.filed {
		return
	}
	sl := slot{s.workload, s.class}
	delete(t.slots[sl], key)
	if len(t.slots[sl]) == 0 {
		delete(t.slots, sl)
		delete(t.classes[sl.workload], sl.class)
		if len(t.classes[sl.workload]) == 0 {
			delete(t.classes, sl.workload)
		}
		delete(t.latest, sl)
		delete(t.sent, sl)
		delete(t.told, sl)
	}
}

// log tells whether o, the Over of the status key, is to be logged: over
// a limit and not logged yet for the status. gone drops the status.
func (t *tracker) log(key string, o Over, gone bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if gone || !o.Any() {
		delete(t.logged, key)
		return false
	}
	if t.logged[key] == o {
		return false
	}
	t.logged[key] = o
	return true
}

// untold tells whether the filed status key is over a limit not reported
// yet on its workload for its class.
func (t *tracker) untold(key string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.statuses[key]
	return s != nil && s.filed && s.over.Any() && t.told[slot{s.workload, s.class}] != s.over
}

// Report is a status over the limits, to report on its workload.
type Report struct {
	Status, Pod, Class string
	Over               Over
}

// Note says the report for people (an Event note).
func (r Report) Note() string { return r.Over.Note(r.Status, r.Pod, r.Class) }

// reports returns, for each class of w that tells whether to report
// (the workload opted in to it), one status over the limits not reported
// yet for the class (the first by key), and marks it reported.
func (t *tracker) reports(w object.Ref, report func(class string) bool) []Report {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Report
	for _, class := range slices.Sorted(maps.Keys(t.classes[w])) {
		sl := slot{w, class}
		if !report(class) {
			continue
		}
		for _, key := range slices.Sorted(maps.Keys(t.slots[sl])) {
			s := t.statuses[key]
			if s.over.Any() && t.told[sl] != s.over {
				t.told[sl] = s.over
				out = append(out, Report{Status: s.name, Pod: s.pod, Class: class, Over: s.over})
				break
			}
		}
	}
	return out
}

// current returns the current versions of sl; the caller holds mu.
func (t *tracker) current(sl slot) (seen, bool) {
	if l, ok := t.latest[sl]; ok {
		return l, true
	}
	var cands []seen
	for key := range t.slots[sl] {
		cands = append(cands, *t.statuses[key])
	}
	return pick(cands)
}

// pick returns the current versions among statuses of one slot: the latest
// written while watched; with none, among those created last, those most
// statuses say, ties to the smallest digest, so that every replica picks
// the same.
func pick(statuses []seen) (seen, bool) {
	if len(statuses) == 0 {
		return seen{}, false
	}
	var best seen
	newest := statuses[0].created
	for _, s := range statuses {
		if s.seq > best.seq {
			best = s
		}
		newest = max(newest, s.created)
	}
	if best.seq > 0 {
		return best, true
	}
	count := map[string]int{}
	for _, s := range statuses {
		if s.created == newest {
			count[s.digest]++
		}
	}
	digests := slices.Sorted(maps.Keys(count))
	top := digests[0]
	for _, d := range digests {
		if count[d] > count[top] {
			top = d
		}
	}
	for _, s := range statuses {
		if s.digest == top {
			return s, true
		}
	}
	return seen{}, false
}

// mounted returns, per class the pods of w mount, the current version
// hash of each object.
func (t *tracker) mounted(w object.Ref) map[string]map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out map[string]map[string]string
	for class := range t.classes[w] {
		sl := slot{w, class}
		if cur, ok := t.current(sl); ok {
			if out == nil {
				out = map[string]map[string]string{}
			}
			out[sl.class] = maps.Clone(cur.objects)
		}
	}
	return out
}
