package snapshot

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/watcher-dev/watcher/internal/pin"
)

// snapStore is the snapshots' watch of one kind in one namespace ("":
// all).
type snapStore struct {
	namespace string
	store     toolscache.Indexer
	synced    func() bool
}

// sized is one snapshot's share of its namespace's bytes.
type sized struct {
	namespace string
	bytes     int64
}

// Stored returns the bytes of the snapshots of namespace ns, as watched
// (the budget of snapshot.Maker).
func (o *Owners) Stored(ns string) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.stored[ns]
}

// count adds (or, gone, removes) a snapshot's bytes to its namespace's.
func (o *Owners) count(obj any, gone bool) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	n := pin.SignedBytes(m.Namespace, m.Name, m.Annotations[pin.Bytes], m.Annotations[pin.BytesSignature], o.Sign)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stored == nil {
		o.stored, o.sizes = map[string]int64{}, map[types.UID]sized{}
	}
	if was, ok := o.sizes[m.UID]; ok {
		o.stored[was.namespace] -= was.bytes
		delete(o.sizes, m.UID)
	}
	if !gone && n > 0 {
		o.sizes[m.UID] = sized{namespace: m.Namespace, bytes: n}
		o.stored[m.Namespace] += n
	}
	if o.stored[m.Namespace] <= 0 {
		delete(o.stored, m.Namespace)
	}
}

// cachedSnapshot returns the snapshot ns/name of kind from the snapshots'
// watch, if it holds it.
func (o *Owners) cachedSnapshot(kind, ns, name string) (*metav1.PartialObjectMetadata, bool) {
	o.mu.Lock()
	stores := o.snapshots[kind]
	o.mu.Unlock()
	for _, st := range stores {
		if obj, ok, _ := st.store.GetByKey(ns + "/" + name); ok {
			return obj.(*metav1.PartialObjectMetadata).DeepCopy(), true
		}
	}
	return nil, false
}

// Has reports whether the snapshot ns/name of kind (pin.ConfigMap or
// pin.Secret) exists, as the snapshots' watch sees every snapshot
// (labelled pin.SnapshotLabel) of the namespaces watched: known is false
// while that watch has not synced (or does not cover ns), and then exists
// says nothing.
func (o *Owners) Has(ns, kind, name string) (exists, known bool) {
	o.mu.Lock()
	stores := o.snapshots[kind]
	o.mu.Unlock()
	for _, st := range stores {
		if st.namespace != metav1.NamespaceAll && st.namespace != ns {
			continue
		}
		if st.synced == nil || !st.synced() {
			return false, false
		}
		obj, ok, _ := st.store.GetByKey(ns + "/" + name)
		if !ok {
			return false, true
		}
		return obj.(*metav1.PartialObjectMetadata).Labels[pin.SnapshotLabel] == "true", true
	}
	return false, false
}

// byOwner indexes the snapshots by the UIDs of their owners.
const byOwner = "owner"

// ownerUIDs is the byOwner index.
func ownerUIDs(obj any) ([]string, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return nil, nil
	}
	out := make([]string, 0, len(m.OwnerReferences))
	for _, r := range m.OwnerReferences {
		out = append(out, string(r.UID))
	}
	return out, nil
}
