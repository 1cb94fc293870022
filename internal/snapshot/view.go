package snapshot

import "k8s.io/apimachinery/pkg/types"

// PinnedBefore reports whether a revision of the workload uid is pinned
// (pin.PinnedLabel), as the revisions' watch sees them: a workload whose
// template has neither pins nor the label of the revision watcher wrote
// lost both (a replace); it was not simply never pinned. known is false
// while the watch has not synced.
func (o *Owners) PinnedBefore(_ string, uid types.UID) (pinned, known bool) {
	o.mu.Lock()
	watches := o.revisions
	o.mu.Unlock()
	for _, w := range watches {
		if !w.inf.HasSynced() {
			return false, false
		}
	}
	for _, w := range watches {
		if objs, _ := w.inf.GetIndexer().ByIndex(byController, string(uid)); len(objs) > 0 {
			return true, true
		}
	}
	return false, len(watches) > 0
}
