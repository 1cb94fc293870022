package controller

import "time"

// The namespace selector (--namespace-selector): what is done, and when,
// is told in package selection; the namespaces' events are handled by
// package namespaces.

// namespaceWait is how long a request of a namespace that came to match
// waits for the namespace's event to be handled.
const namespaceWait = 100 * time.Millisecond

// inScope tells whether the objects of namespace are handled; wait: not
// yet known, look again after namespaceWait.
func (r *Reconciler) inScope(namespace string) (ok, wait bool) {
	if !r.Store.Selected(namespace) {
		return false, false
	}
	if !r.selection.IsTold(namespace) {
		return false, true
	}
	return true, false
}
