package optin

import (
	"container/list"
	"sync"
)

// lists caches parsed reload lists by annotation value: a list is read for
// every reference of every workload handled, and a cluster has few
// distinct lists.
var lists = newCache(MaxCacheBytes)

// cache is a least-recently-used cache of parsed lists bounded by their
// estimated memory. Its lock is held only to look up, insert and evict,
// never while a list is compiled.
type cache struct {
	mu    sync.Mutex
	max   int
	bytes int
	items map[string]*list.Element
	order *list.List // of *cached, most recently used first
}

type cached struct {
	key  string
	list *parsedList
}

func newCache(maxBytes int) *cache {
	return &cache{max: maxBytes, items: map[string]*list.Element{}, order: list.New()}
}

// get returns the list cached for v.
func (c *cache) get(v string) (*parsedList, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[v]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cached).list, true
}

// add caches l for v, evicting the least recently used lists until the
// cache fits, and returns the list cached for v: one another goroutine
// compiled meanwhile wins. A list larger than the cache is not kept.
func (c *cache) add(v string, l *parsedList) *parsedList {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[v]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*cached).list
	}
	if l.cost > c.max {
		return l
	}
	c.items[v] = c.order.PushFront(&cached{key: v, list: l})
	c.bytes += l.cost
	for c.bytes > c.max {
		last := c.order.Back()
		old := last.Value.(*cached)
		c.order.Remove(last)
		delete(c.items, old.key)
		c.bytes -= old.list.cost
	}
	return l
}

// size returns the number of lists cached and their estimated bytes.
func (c *cache) size() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items), c.bytes
}
