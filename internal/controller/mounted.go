package controller

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/csi"
	"github.com/watcher-dev/watcher/internal/gather"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/workload"
)

// mounted adds to in, for the workload obj, one reference per
// SecretProviderClass its pods mount through the Secrets Store CSI Driver
// and it opted in to (csi.Refs): the objects mounted are its keys, the
// hashes of their versions the keys' hashes. plan.Decide then adopts a
// class seen for the first time, and restarts the workload, once, when
// the versions differ from those recorded; the restart goes through the
// guards, the strategy and the Event like any other. A status of a class
// it opted in to that is over csi's limits is reported once, as a Warning
// Event csi.ReasonOverLimit on the workload.
func (r *Reconciler) mounted(obj client.Object, in *plan.Input) {
	if r.mounts == nil {
		return
	}
	kind, ok := workload.Of(obj)
	if !ok {
		return
	}
	key := object.Ref{Kind: kind.Name(), Namespace: obj.GetNamespace(), Name: obj.GetName()}
	for _, rep := range r.mounts.Reports(key, func(class string) bool { return csi.OptedIn(in.Annotations, class) }) {
		r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, csi.ReasonOverLimit, "Watch", "%s", rep.Note())
	}
	gather.Mounted(in, r.mounts.Mounted(key))
}
