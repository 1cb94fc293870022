package slim

import (
	"strings"
	"sync"
	"sync/atomic"
)

// keyMark begins a label key written as its number in a keyTable: two
// bytes follow, each 0x80 plus seven bits of the number, so neither can be
// "=" or ",". No label key from the API server begins with it (keys begin
// with a letter or a digit).
const keyMark = "\x01"

// maxKeys bounds a keyTable: the keys of a cluster are a few dozen, and
// a tenant inventing keys fills the table once, after which new keys are
// written out in full.
const maxKeys = 1 << 12

// labelKeys numbers the label keys of every stored object.
var labelKeys keyTable

// keyTable numbers label keys, first seen first, for the life of the
// process: a number always means the same key, so equal label sets are
// always encoded alike.
type keyTable struct {
	mu     sync.Mutex
	number map[string]int // guarded by mu
	// keys holds the keys by number; writers append under mu, readers
	// load it without locking: an entry never changes once published.
	keys atomic.Pointer[[]string]
}

// code returns how k is written in an encoded label set: its number, or k
// itself once the table is full.
func (t *keyTable) code(k string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.number[k]
	if !ok {
		var keys []string
		if p := t.keys.Load(); p != nil {
			keys = *p
		}
		if len(keys) >= maxKeys {
			return k
		}
		if t.number == nil {
			t.number = map[string]int{}
		}
		n = len(keys)
		t.number[k] = n
		keys = append(keys, strings.Clone(k))
		t.keys.Store(&keys)
	}
	return keyMark + string([]byte{0x80 | byte(n>>7), 0x80 | byte(n&0x7f)})
}

// key returns the label key that code c stands for; a key written in full
// is its own code.
func (t *keyTable) key(c string) string {
	if len(c) != len(keyMark)+2 || !strings.HasPrefix(c, keyMark) {
		return c
	}
	n := int(c[1]&0x7f)<<7 | int(c[2]&0x7f)
	p := t.keys.Load()
	if p == nil || n >= len(*p) {
		return "" // never written by code
	}
	return (*p)[n]
}
