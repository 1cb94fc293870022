// Package csi follows the rotations of the Secrets Store CSI Driver
// (sigs.k8s.io/secrets-store-csi-driver): for every pod that mounts a
// SecretProviderClass, the driver keeps one SecretProviderClassPodStatus
// (secrets-store.csi.x-k8s.io/v1) listing the objects it mounted and their
// versions, and rewrites it when a rotation fetches new versions. A
// workload whose pods mount a class it opted in to (OptedIn) is restarted
// when the versions change, as Reloader does with --enable-csi-integration.
//
// A status is kept in memory as a Status (Transform): its name, its pod,
// its class and, per object, a hash of the object's version, keyed and
// bound to its namespace, class and object as the hashes of every other
// record (package hash: nobody can test a guessed version against the
// hashes recorded on a workload); nothing else
// (the target path, labels) is kept, and no more than the limits allow
// (MaxObjects). Its pod's workload is found with a GET
// of the pod's metadata and of its ReplicaSet's (Owners), cached per pod,
// without any pod informer.
//
// The controller decides the restart like one for a ConfigMap: the class
// is a reference of the workload ("SecretProviderClass/name") whose keys
// are the objects' ids and whose key hashes are their version hashes, kept
// in the workload's record (package plan). A class seen for the first time
// is adopted; later versions restart the workload once, however many of
// its pods' statuses carry them, since the record then holds them; the
// record survives a restart of watcher. Which versions are current for a
// workload and a class (tracker.current):
//
//	statuses known                          current versions
//	some written while watched (live)       those of the latest written
//	                                        (a rotation, or a new pod's mount),
//	                                        kept after its status goes
//	only listed at start-up                 among those created last (to the
//	                                        second: the latest mounts), those
//	                                        most hold (ties: the smallest
//	                                        digest)
//	none                                    unknown: the record is kept
//
// Versions are opaque (no order can be told from them), so the order of the
// writes decides: a pod's status is written at its mount, with the
// provider's versions of then, and at each rotation. The statuses of a
// workload's old pods, not rotated yet, must not roll it back while its
// new pods, mounted with the new versions, replace them.
package csi

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/refs"
)

// GVK and GVR name SecretProviderClassPodStatuses.
var (
	GVK = schema.GroupVersionKind{Group: "secrets-store.csi.x-k8s.io", Version: "v1", Kind: "SecretProviderClassPodStatus"}
	GVR = GVK.GroupVersion().WithResource("secretproviderclasspodstatuses")
)

// Status is a SecretProviderClassPodStatus as kept in memory.
type Status struct {
	metav1.TypeMeta
	// ObjectMeta holds the namespace, name, UID, resourceVersion, creation
	// time (the first mount) and the owner reference naming the pod (the
	// driver sets it) only.
	metav1.ObjectMeta
	// Pod and Class are status.podName and status.secretProviderClassName.
	Pod, Class string
	// Mounted is status.mounted.
	Mounted bool
	// Objects maps each object's id (status.objects[].id) to VersionHash
	// of its version.
	Objects map[string]string
	// Digest is Digest(Class, Objects).
	Digest string
	// Over says how the status is over the limits (see MaxObjects); a
	// refused status has no pod, class nor objects.
	Over Over
}

// DeepCopyObject implements runtime.Object.
func (s *Status) DeepCopyObject() runtime.Object {
	c := *s
	s.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	c.Objects = make(map[string]string, len(s.Objects))
	for k, v := range s.Objects {
		c.Objects[k] = v
	}
	return &c
}

// VersionHash is the hash of one object's version kept in memory and in
// the workload's record: the key hash of h (package hash) of the object id
// with the version as its value, in the SecretProviderClass class of
// namespace; keyed with the key of the namespace, and bound to the class
// and the object, so that equal versions of two objects hash apart.
func VersionHash(h *hash.Hasher, namespace, class, id, version string) string {
	return versionHashes(h, namespace, class, map[string][]byte{id: []byte(version)})[id]
}

// versionHashes returns the VersionHash of each object id of class in
// namespace, versions holding their versions.
func versionHashes(h *hash.Hasher, namespace, class string, versions map[string][]byte) map[string]string {
	return h.Of(hash.Source{Kind: string(refs.SecretProviderClass), Namespace: namespace, Name: class}, versions).Keys
}

// Digest is the hash of a status: its class and each object's id and
// version hash, in the order of the ids. Two statuses with the same digest
// say the same versions of the same class.
func Digest(class string, objects map[string]string) string {
	ids := make([]string, 0, len(objects))
	for id := range objects {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var b strings.Builder
	b.WriteString(class)
	for _, id := range ids {
		b.WriteString("\x00" + id + "@" + objects[id])
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:8])
}

// Rotation names one rotation of a class for a workload: whatever number
// of its pods' statuses carry the same versions, they are one rotation.
type Rotation struct {
	Workload object.Ref
	Class    string
	// Digest is the Digest of the versions.
	Digest string
}

// Transform returns a cache transform that replaces a
// SecretProviderClassPodStatus (an unstructured object) by a Status, its
// versions hashed by h. Objects already transformed, and any other object,
// pass through.
func Transform(h *hash.Hasher) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		return FromUnstructured(u, h), nil
	}
}

// FromUnstructured returns the Status of a SecretProviderClassPodStatus,
// its versions hashed by h (VersionHash). Malformed fields read as absent.
func FromUnstructured(u *unstructured.Unstructured, h *hash.Hasher) *Status {
	s := &Status{
		TypeMeta: metav1.TypeMeta{APIVersion: GVK.GroupVersion().String(), Kind: GVK.Kind},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: u.GetNamespace(), Name: u.GetName(), UID: u.GetUID(),
			ResourceVersion:   u.GetResourceVersion(),
			CreationTimestamp: u.GetCreationTimestamp(),
		},
		Objects: map[string]string{},
	}
	s.Pod, _, _ = unstructured.NestedString(u.Object, "status", "podName")
	s.Class, _, _ = unstructured.NestedString(u.Object, "status", "secretProviderClassName")
	s.Mounted, _, _ = unstructured.NestedBool(u.Object, "status", "mounted")
	s.OwnerReferences = podOwner(u.GetOwnerReferences(), s.Pod)
	if bad := cmp.Or(badName("podName", s.Pod), badName("secretProviderClassName", s.Class)); bad != "" {
		s.Over = Over{Refused: bad}
		s.Pod, s.Class, s.OwnerReferences = "", "", nil
		s.Digest = Digest("", s.Objects)
		return s
	}
	objs, _, _ := unstructured.NestedSlice(u.Object, "status", "objects")
	ids := make([]string, 0, len(objs))
	versions := make(map[string][]byte, len(objs))
	for _, o := range objs {
		m, ok := o.(map[string]any)
		if !ok {
			continue
		}
		id, _ := m["id"].(string)
		version, _ := m["version"].(string)
		if id == "" {
			continue
		}
		ids = append(ids, id)
		versions[id] = []byte(version) // the last of equal ids, as keep
	}
	hashes := versionHashes(h, s.Namespace, s.Class, versions)
	entries := make([]entry, 0, len(ids))
	for _, id := range ids {
		safe, short := safeID(id)
		if short {
			s.Over.Shortened++
		}
		entries = append(entries, entry{id: safe, hash: hashes[id]})
	}
	slices.SortStableFunc(entries, func(a, b entry) int { return strings.Compare(a.id, b.id) })
	var folded string
	s.Objects, folded, s.Over.Folded = keep(entries)
	if s.Over.Folded > 0 {
		s.Over.Objects = len(entries)
		s.Objects[FoldedID] = folded
	} else if s.Over.Shortened > 0 {
		s.Over.Objects = len(entries)
	}
	s.Digest = Digest(s.Class, s.Objects)
	return s
}

// podOwner returns, of refs, the one that names the pod: the only owner
// reference kept (PodUID).
func podOwner(refs []metav1.OwnerReference, pod string) []metav1.OwnerReference {
	for _, o := range refs {
		if o.Kind == "Pod" && o.Name == pod {
			return []metav1.OwnerReference{o}
		}
	}
	return nil
}

// PodUID returns the UID of the pod the driver names as the status's
// owner; "" when it names none.
func (s *Status) PodUID() string {
	for _, o := range s.OwnerReferences {
		if o.Kind == "Pod" && o.Name == s.Pod {
			return string(o.UID)
		}
	}
	return ""
}

// OptedIn tells whether a workload whose annotations (optin.Of) are ann
// opted in to restarts for rotations of class, as in Reloader: a reload
// list (secretproviderclass.reloader.stakater.com/reload) names it, or an
// auto annotation (secretproviderclass.reloader.stakater.com/auto,
// reloader.stakater.com/auto, watcher.dev/auto) is true. Unlike for
// ConfigMaps and Secrets, watcher's --discovery all does not opt in: a
// rotation restarts only workloads that asked for it.
func OptedIn(ann map[string]string, class string) bool {
	return optin.AutoFor(ann, refs.SecretProviderClass) == optin.On || optin.Named(ann, refs.SecretProviderClass, class)
}
