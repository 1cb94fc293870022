package lock

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
// namespace/name: "Kind/namespace/name@deleted". A deletion has no
// version left, and the controller, which looks the object up when it
// handles the change, no longer knows its UID: the name is the same for
// every deletion of an object of that name, so the controller never
// marks a deletion done (the deletion of the object created again later
// would be taken for this one).
func DeletedID(kind, namespace, name string) string {
	return kind + "/" + namespace + "/" + name + "@deleted"
}
