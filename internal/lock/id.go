package lock

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ID names the change of one version of an object of kind, the event whose
// lock the replicas take: "Kind/namespace/name/uid@resourceVersion". Its
// UID tells it from an object of the same name deleted and created again,
// or from the same resourceVersion after an etcd restore. The controller
// names a changed ConfigMap or Secret so, and package sealed a changed
// SealedSecret.
func ID(kind string, obj metav1.Object) string {
	return kind + "/" + obj.GetNamespace() + "/" + obj.GetName() + "/" + string(obj.GetUID()) + "@" + obj.GetResourceVersion()
}

// DeletedID names the deletion of the object of kind called
// namespace/name: "Kind/namespace/name/uid@deleted", or
// "Kind/namespace/name@deleted" when uid is empty. A deletion has no version
// left. The controller, which looks the object up when it handles the
// change, no longer knows its UID and passes none: the name is then the
// same for every deletion of an object of that name, so the controller
// never marks a deletion done (the deletion of the object created again
// later would be taken for this one). Package sealed, which is handed the
// deleted object and marks each claimed change done, passes its UID, so
// that a SealedSecret created again and deleted again is reported again.
func DeletedID(kind, namespace, name string, uid types.UID) string {
	if uid == "" {
		return kind + "/" + namespace + "/" + name + "@deleted"
	}
	return kind + "/" + namespace + "/" + name + "/" + string(uid) + "@deleted"
}
