// Package selection keeps what the controller was told of the namespaces
// that the namespace selector (--namespace-selector) selects, and decides
// what a workload adopted with its namespace restarts.
//
// With a selector, the informers of ConfigMaps, Secrets and workloads
// watch every namespace as without it; the store's informer of the selected namespaces (store.Selected) says
// which of them are handled, when a request is processed:
//
//	event                                what is done
//	a change in a namespace not          nothing: no lock taken, no
//	  selected                           workload reconciled
//	a workload of a namespace not        nothing: never adopted, recorded
//	  selected                           or restarted
//	a namespace comes to match, while    each of its workloads is enqueued
//	  watcher runs (leader or standby)   for adoption by version: its
//	                                     record is written as the
//	                                     configuration is now; a change of
//	                                     an object whose resourceVersion
//	                                     is older than the namespace's at
//	                                     the match (made while it was not
//	                                     selected) restarts nothing; one
//	                                     made after the match restarts, as
//	                                     everywhere
//	a namespace no longer matches        its pending adoptions are
//	                                     forgotten; its later changes
//	                                     restart nothing
//	watcher starts (or a replica         the namespaces matching then are
//	  becomes the leader)                selected, with no adoption:
//	                                     changes made while watcher was
//	                                     down restart their workloads, as
//	                                     everywhere; the marks a standby
//	                                     took when a namespace came to
//	                                     match adopt only what was written
//	                                     before that match
//
// The filter is applied when a request is processed, not when an event
// is enqueued: the informers deliver their events in no set order. A
// namespace the informer holds but whose event the handler has not been
// given yet (the instant after it came to match, or at start) is neither
// handled nor skipped: the request waits (the controller's namespaceWait)
// until the adoptions of the namespace are marked. An adoption is done by the first
// reconcile of the workload after that, whatever enqueued it, on whichever
// replica leads then, days later or after a handover: since it compares
// versions, never the time of the reconcile, a change made after the
// match, even in the instant before that reconcile, still restarts. A
// change whose version cannot be compared (a deleted object, a
// SecretProviderClass's, a resourceVersion that is not a number) is
// recorded without a restart, as a change made before the match.
package selection

import (
	"sync"

	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/plan"
)

// Namespaces is what the controller was told of the selected namespaces:
// which it was told of, and the workloads of those newly selected not
// reconciled since, each with the namespace's resourceVersion when it came
// to match. It is safe for concurrent use. A nil *Namespaces (no selector)
// is told of every namespace and adopts nothing.
type Namespaces struct {
	mu    sync.Mutex
	told  map[string]bool
	adopt map[object.Ref]string
}

// New returns an empty Namespaces.
func New() *Namespaces {
	return &Namespaces{told: map[string]bool{}, adopt: map[object.Ref]string{}}
}

// Selected notes that namespace matches, with its workloads keys to adopt
// (none for a namespace of the informer's initial list), the namespace
// being at resourceVersion since.
func (s *Namespaces) Selected(namespace, since string, keys []object.Ref) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		s.adopt[k] = since
	}
	s.told[namespace] = true
}

// Dropped notes that namespace no longer matches, and forgets its
// adoptions.
func (s *Namespaces) Dropped(namespace string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.told, namespace)
	for k := range s.adopt {
		if k.Namespace == namespace {
			delete(s.adopt, k)
		}
	}
}

// IsTold tells whether the controller was told that namespace matches.
func (s *Namespaces) IsTold(namespace string) bool {
	if s == nil {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.told[namespace]
}

// Take tells whether key is to be adopted, with the resourceVersion of its
// namespace when it came to match, and forgets it.
func (s *Namespaces) Take(key object.Ref) (since string, ok bool) {
	if s == nil {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	since, ok = s.adopt[key]
	delete(s.adopt, key)
	return since, ok
}

// Readopt marks key to be adopted again (its adoption failed), unless its
// namespace was dropped meanwhile.
func (s *Namespaces) Readopt(key object.Ref, since string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.told[key.Namespace] {
		s.adopt[key] = since
	}
}

// Adopted is p for a workload adopted with its namespace, which came to
// match at resourceVersion since: its record is brought to the
// configuration as it is now; the changes of objects written after the
// match (configs, by reference ID, say their versions) restart it, the
// others restart nothing.
//
//	p        changed objects' versions          result
//	Restart  all older than since, or unknown   Refresh, no change
//	Restart  some newer than since              Restart for those alone
//	other    -                                  p
func Adopted(p plan.Plan, configs map[string]plan.Config, since string) plan.Plan {
	if p.Action != plan.Restart {
		return p
	}
	var after []plan.Change
	for _, c := range p.Changes {
		cfg := configs[c.Ref.ID()]
		if n, err := resourceversion.CompareResourceVersion(cfg.Version, since); cfg.Present && err == nil && n > 0 {
			after = append(after, c)
		}
	}
	if len(after) == 0 {
		p.Action = plan.Refresh
	}
	p.Changes = after
	return p
}
