package snapshot

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

// Exists reports, from the snapshots' watch (which sees every snapshot
// of the namespaces watched, whatever the controller's --config-selector),
// whether the snapshot ns/name of kind (pin.ConfigMap, pin.Secret)
// exists; known is false until the watch has synced, when the caller
// must ask the API server.
func (o *Owners) Exists(kind, ns, name string) (exists, known bool) {
	if o == nil || !o.synced.Load() {
		return false, false
	}
	_, ok := o.cachedSnapshot(kind, ns, name)
	return ok, true
}

// PinnedBefore reports whether a revision of the workload uid in ns is
// pinned (pin.PinnedLabel): a workload whose template has neither pins
// nor the label of the revision watcher wrote lost both (a replace), it
// was not simply never pinned. known is false until the watch has synced.
func (o *Owners) PinnedBefore(ns string, uid types.UID) (pinned, known bool) {
	if o == nil || !o.synced.Load() {
		return false, false
	}
	for _, inf := range o.revisions {
		objs, err := inf.GetIndexer().ByIndex(toolscache.NamespaceIndex, ns)
		if err != nil {
			return false, false
		}
		for _, obj := range objs {
			if ref := metav1.GetControllerOfNoCopy(obj.(*metav1.PartialObjectMetadata)); ref != nil && ref.UID == uid {
				return true, true
			}
		}
	}
	return false, true
}
