package controller

import (
	"slices"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/attribution"
	"github.com/watcher-dev/watcher/internal/refs"
)

// changedBy remembers who changed each ConfigMap or Secret whose change is
// not handled yet: the field managers of every data change since it was
// last handled (a burst coalesced into one change may have several
// authors). The handler, which sees each object before and after its
// change, adds them; processChange forgets them once the change is
// handled. It stays small: entries live until handled, or at most
// changedByTTL (on a standby, which handles nothing), and past
// maxChangedBy entries the expired ones go, then all (attribution is then
// lost for the changes pending, never a restart).
type changedBy struct {
	mu  sync.Mutex
	m   map[string]authors
	now func() time.Time
}

type authors struct {
	managers []string
	since    time.Time
}

const (
	changedByTTL = 10 * time.Minute
	maxChangedBy = 4096
)

func newChangedBy() *changedBy {
	return &changedBy{m: map[string]authors{}, now: time.Now}
}

// changeID names a ConfigMap or Secret: "Kind namespace/name".
func changeID(kind, namespace, name string) string { return kind + " " + namespace + "/" + name }

// add records that the object id was changed from old to cur.
func (c *changedBy) add(id string, old, cur client.Object) {
	var was []attribution.Writer
	if old != nil {
		was = attribution.Of(old)
	}
	managers := attribution.Changed(was, attribution.Of(cur))
	if len(managers) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	a, ok := c.m[id]
	if !ok || now.Sub(a.since) > changedByTTL {
		a = authors{since: now}
	}
	a.managers = append(a.managers, managers...)
	slices.Sort(a.managers)
	a.managers = slices.Compact(a.managers)
	c.m[id] = a
	if len(c.m) > maxChangedBy {
		for k, v := range c.m {
			if now.Sub(v.since) > changedByTTL {
				delete(c.m, k)
			}
		}
		if len(c.m) > maxChangedBy {
			clear(c.m)
		}
	}
}

// of returns who changed the object id since it was last handled; nil if
// unknown.
func (c *changedBy) of(id string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.m[id]
	if !ok || c.now().Sub(a.since) > changedByTTL {
		return nil
	}
	return slices.Clone(a.managers)
}

// forget drops the object id once its change is handled; a nil
// changedBy remembers nothing.
func (c *changedBy) forget(id string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
}

// writers returns who changed the object ref of namespace: those recorded
// since its change was last handled or, if none were (a change made while
// watcher was down, found at start-up), the last writers of its content.
func (r *Reconciler) writers(namespace string, ref refs.Ref) []string {
	if r.changedBy != nil {
		if m := r.changedBy.of(changeID(string(ref.Kind), namespace, ref.Name)); m != nil {
			return m
		}
	}
	obj, err := r.Store.Get(string(ref.Kind), namespace, ref.Name)
	if err != nil || obj == nil {
		return nil
	}
	ws := attribution.Of(obj)
	return attribution.Changed(ws, ws) // none moved: the newest writers
}
