package producer

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
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
	// Now is the clock of the memory of non-producers; nil: time.Now.
	Now func() time.Time

	mu  sync.Mutex
	not map[types.UID]time.Time // owners found not to be producers, by UID: when
}

// forgetAfter is how long an owner found not to be a producer (a
// Deployment, a kind watcher may not read, an owner gone) is not read
// again: most never become one, and one that does is read again a few
// minutes later.
const forgetAfter = 5 * time.Minute

// maxRemembered bounds the memory of non-producers; when full it is
// emptied.
const maxRemembered = 4096

func (o *Owners) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// notProducer tells whether the owner uid was found not to be a producer
// less than forgetAfter ago.
func (o *Owners) notProducer(uid types.UID) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	at, ok := o.not[uid]
	return ok && o.now().Sub(at) < forgetAfter
}

// remember notes that the owner uid is not a producer.
func (o *Owners) remember(uid types.UID) {
	if uid == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.not == nil || len(o.not) >= maxRemembered {
		o.not = map[types.UID]time.Time{}
	}
	o.not[uid] = o.now()
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
	if !found || ref.Name == "" || (ref.UID != "" && o.notProducer(ref.UID)) {
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
		o.remember(ref.UID)
		return Verdict{}, false, true
	case err != nil:
		return Verdict{Source: src, Producer: p, State: Progressing, Reason: ReasonOwnerUnreadable,
			Message: note.Cut("cannot read the owner: "+err.Error(), 2*maxMessage)}, true, true
	case ref.UID != "" && u.GetUID() != ref.UID:
		o.remember(ref.UID) // that owner is gone; another has its name
		return Verdict{}, false, true
	}
	state, reason, message, isProducer := generic(u)
	if !isProducer {
		// Remembered only once its controller has reported on its
		// generation without a Ready condition (a Deployment): one with no
		// status yet may be a producer that has not reported.
		if g, found, ok := observedGeneration(u); found && ok && g == u.GetGeneration() {
			o.remember(ref.UID)
		}
		return Verdict{}, false, true
	}
	return Verdict{Source: src, Producer: p, State: state, Reason: reason, Message: message}, true, true
}
