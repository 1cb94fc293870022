package controller

import (
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/csi"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/workload"
)

// mounted adds to in, for the workload obj, one reference per
// SecretProviderClass its pods mount through the Secrets Store CSI Driver
// and it opted in to (csi.OptedIn): the objects mounted are its keys, the
// hashes of their versions the keys' hashes. plan.Decide then adopts a
// class seen for the first time, and restarts the workload, once, when
// the versions differ from those recorded. A recorded class whose current
// versions are not known (its pods have no status now, or watcher has not
// read them yet) is given as recorded: nothing changed, the record is
// kept.
func (r *Reconciler) mounted(obj client.Object, in *plan.Input) {
	if r.mounts == nil {
		return
	}
	kind, ok := workload.Of(obj)
	if !ok {
		return
	}
	key := object.Ref{Kind: kind.Name(), Namespace: obj.GetNamespace(), Name: obj.GetName()}
	add := func(class string, keys map[string]string) {
		ref := refs.Ref{Kind: refs.SecretProviderClass, Name: class, AllKeys: true, Optional: true}
		if _, dup := in.Configs[ref.ID()]; dup || !csi.OptedIn(in.Annotations, class) {
			return
		}
		in.Refs = append(in.Refs, ref)
		in.Configs[ref.ID()] = plan.Config{Present: true, Keys: keys}
	}
	for class, keys := range r.mounts.Mounted(key) {
		add(class, keys)
	}
	prefix := string(refs.SecretProviderClass) + "/"
	for id, e := range in.Recorded {
		if class, ok := strings.CutPrefix(id, prefix); ok && e != nil && e.Digest == "" {
			add(class, e.Keys)
		}
	}
}
