package producer

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/watcher-dev/watcher/internal/note"
	"github.com/watcher-dev/watcher/internal/object"
)

// timeNow is the default clock of ForceSync.
var timeNow = time.Now

// maxOwnerReads bounds the owners one Check reads: a workload reading
// many sources owned by other controllers costs a few requests, not one
// per source.
const maxOwnerReads = 8

// ownerTimeout bounds one read of an owner.
const ownerTimeout = 5 * time.Second

// Owners reads, on demand, the controller owner of a source that no known
// kind produces, and judges it as a generic producer (the package
// comment). A nil *Owners reads nothing.
type Owners struct {
	// Owner returns the controller ownerReference of source, from the
	// caller's cache of sources; false: none.
	Owner func(source object.Ref) (metav1.OwnerReference, bool)
	// Mapper maps the owner's kind to its resource.
	Mapper meta.RESTMapper
	// Dynamic reads the owner.
	Dynamic dynamic.Interface
}

// verdict returns the verdict of src's controller owner; ok is false when
// it has none or the owner is not a producer (no kstatus-style status, not
// found, another object of that name, a kind not served or not readable),
// read tells whether the owner was requested.
func (o *Owners) verdict(ctx context.Context, src object.Ref) (v Verdict, ok, read bool) {
	if o == nil || o.Owner == nil || o.Mapper == nil || o.Dynamic == nil {
		return Verdict{}, false, false
	}
	ref, found := o.Owner(src)
	if !found || ref.Name == "" {
		return Verdict{}, false, false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || isKnown(gv.Group, ref.Kind) {
		return Verdict{}, false, false
	}
	m, err := o.Mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: ref.Kind}, gv.Version)
	if err != nil || m.Scope.Name() != meta.RESTScopeNameNamespace {
		return Verdict{}, false, false // not served, or cluster-scoped (cannot own a namespaced source's producer status here)
	}
	p := object.Ref{Kind: ref.Kind, Namespace: src.Namespace, Name: ref.Name}
	ctx, cancel := context.WithTimeout(ctx, ownerTimeout)
	defer cancel()
	u, err := o.Dynamic.Resource(m.Resource).Namespace(src.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsMethodNotSupported(err):
		return Verdict{}, false, true
	case err != nil:
		return Verdict{Source: src, Producer: p, State: Progressing, Reason: ReasonOwnerUnreadable,
			Message: note.Cut("cannot read the owner: "+err.Error(), 2*maxMessage)}, true, true
	case ref.UID != "" && u.GetUID() != ref.UID:
		return Verdict{}, false, true // another object of that name
	}
	state, reason, message, isProducer := generic(u)
	if !isProducer {
		return Verdict{}, false, true
	}
	return Verdict{Source: src, Producer: p, State: state, Reason: reason, Message: message}, true, true
}
