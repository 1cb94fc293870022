package resolve

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/slim"
)

// IsSnapshot reports whether cfg, a ConfigMap or Secret as the store keeps
// it (labels encoded, see slim.Labels) or as read from the API server, is a
// snapshot made for pinned config revisions (package pin). A snapshot is
// never a source: no Match reaches it (Resolve), and the store finds no
// matching workload for its change (store.Users). A reference that names it
// stays one: a pod spec naming a ConfigMap is what its pods read, whatever
// the labels.
//
// The rule is the label alone, pin.SnapshotLabel "true", not the label
// and the name's shape ("-pin-" and pin.SumLen hex digits):
//
//	object                                         a snapshot?
//	labelled, named <source>-pin-<20 hex>          yes (every snapshot)
//	labelled, any other name                       yes
//	named <source>-pin-<20 hex>, not labelled      no
//
// The label is what the snapshot writer and its garbage collection select
// snapshots by (package snapshot), and what the store keeps of every object
// (the pin.SnapshotOf annotation it may not keep). A tenant who labels a
// ConfigMap of their own takes it out of the matches of their own
// namespace's workloads only (a match never reaches across namespaces):
// that harms no one else, and checking the name too would protect no one.
// Unlike pin.IsSnapshot, which the writer asks before reusing a snapshot of
// one source, it checks neither the source nor immutability: a snapshot of
// any source, or one half-written, is no source either.
func IsSnapshot(cfg metav1.Object) bool {
	return slim.Labels(cfg).Get(pin.SnapshotLabel) == "true"
}
