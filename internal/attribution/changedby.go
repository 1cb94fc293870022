package attribution

import (
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watcher-dev/watcher/internal/object"
)

// ChangedBy remembers who changed each ConfigMap or Secret whose change is
// not handled yet: the field managers of every data change since it was
// last handled (a burst coalesced into one change may have several
// authors). The controller's handler, which sees each object before and
// after its change, adds them; the controller forgets them once the change
// is handled. It stays small: entries live until handled, or at most
// changedByTTL (on a standby, which handles nothing), and past
// maxChangedBy entries the expired ones go, then all (attribution is then
// lost for the changes pending, never a restart). A nil *ChangedBy
// remembers nothing.
type ChangedBy struct {
	mu  sync.Mutex
	m   map[object.Ref]authors
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

// NewChangedBy returns an empty memory.
func NewChangedBy() *ChangedBy {
	return &ChangedBy{m: map[object.Ref]authors{}, now: time.Now}
}

// Add records that the object ref was changed from old (nil: created) to
// cur.
func (c *ChangedBy) Add(ref object.Ref, old, cur metav1.Object) {
	var was []Writer
	if old != nil {
		was = Of(old)
	}
	managers := Changed(was, Of(cur))
	if len(managers) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	a, ok := c.m[ref]
	if !ok || now.Sub(a.since) > changedByTTL {
		a = authors{since: now}
	}
	a.managers = append(a.managers, managers...)
	slices.Sort(a.managers)
	a.managers = slices.Compact(a.managers)
	c.m[ref] = a
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

// Managers returns who changed the object ref since it was last handled;
// nil if unknown.
func (c *ChangedBy) Managers(ref object.Ref) []string {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.m[ref]
	if !ok || c.now().Sub(a.since) > changedByTTL {
		return nil
	}
	return slices.Clone(a.managers)
}

// Forget drops the object ref once its change is handled.
func (c *ChangedBy) Forget(ref object.Ref) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, ref)
}
