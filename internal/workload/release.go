package workload

import (
	"encoding/json"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/packed"
)

// TemplateAnnotation holds, on a workload in watcher's store whose pod
// template change rolls every one of its pods, a digest of that template
// (Template). Like RefsAnnotation, the key is not a valid annotation key.
const TemplateAnnotation = "watcher.dev/cached/template"

// unobserved ends a Template value while the workload's controller has
// not observed its generation (status.observedGeneration is below
// metadata.generation): the object is as the write that changed its spec
// left it, so its resourceVersion is that write's. rolling ends it once
// observed, while pods of another template may still run (its rollout is
// not done): a template change written then may return to one of theirs
// (kubectl rollout undo), whose pods the controller keeps.
const (
	unobserved = "+"
	rolling    = "~"
)

// Template returns a digest of obj's pod template when a change of it
// rolls every pod, followed by "+" while its controller has not observed
// its generation, else by "~" while its status counts pods of another
// template; "" for any other workload:
//
//	workload                                           rolls every pod
//	Deployment, not paused                             yes
//	StatefulSet, RollingUpdate with no partition       yes
//	DaemonSet, RollingUpdate                           yes
//	anything else (a CronJob, an Argo Rollout, whose   no ("")
//	  steps may pause it, OnDelete, a partition)
//
// A stored workload carries it in TemplateAnnotation.
func Template(obj client.Object) string {
	if v, ok := packed.Annotation(obj, TemplateAnnotation); ok {
		return v
	}
	var observed int64
	var others bool // pods of another template run
	switch o := obj.(type) {
	case *appsv1.Deployment:
		if o.Spec.Paused {
			return ""
		}
		observed, others = o.Status.ObservedGeneration, o.Status.UpdatedReplicas != o.Status.Replicas
	case *appsv1.StatefulSet:
		s := o.Spec.UpdateStrategy
		if s.Type == appsv1.OnDeleteStatefulSetStrategyType ||
			(s.RollingUpdate != nil && s.RollingUpdate.Partition != nil && *s.RollingUpdate.Partition > 0) {
			return ""
		}
		observed = o.Status.ObservedGeneration
		others = o.Status.UpdatedReplicas != o.Status.Replicas || o.Status.CurrentRevision != o.Status.UpdateRevision
	case *appsv1.DaemonSet:
		if o.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType {
			return ""
		}
		observed, others = o.Status.ObservedGeneration, o.Status.UpdatedNumberScheduled != o.Status.CurrentNumberScheduled
	default:
		return ""
	}
	kind, _ := Of(obj)
	tmpl, err := kind.PodTemplate(obj)
	if err != nil {
		return ""
	}
	b, err := json.Marshal(tmpl)
	if err != nil {
		return ""
	}
	h := fnv.New64a()
	_, _ = h.Write(b)
	out := strconv.FormatUint(h.Sum64(), 36)
	switch {
	case observed < obj.GetGeneration():
		out += unobserved
	case others:
		out += rolling
	}
	return out
}

// Releases remembers, per workload, the resourceVersion of the write that
// last changed its pod template, when watcher saw that write as it was
// made and every pod ran the template before it (the controller had
// observed it, and its rollout was done): the workload's own rollout
// began after it, and no pod of the new template existed before it (a
// rollout undone half-way goes back to a ReplicaSet that still has pods),
// so its pods read every ConfigMap and Secret as written at or after that
// version. A template change seen otherwise (after a re-list, two spec
// changes at once, a workload that does not roll every pod, one whose
// rollout was in progress) forgets it: unknown, never guessed. It is
// memory only: a new process knows none.
type Releases struct {
	mu sync.Mutex
	m  map[types.UID]release
}

// release is a template change seen as written.
type release struct {
	generation int64
	version    string
}

// Observe takes the update of a stored workload from old to cur.
func (r *Releases) Observe(old, cur client.Object) {
	o, n := Template(old), Template(cur)
	od, nd := strings.TrimRight(o, unobserved+rolling), strings.TrimRight(n, unobserved+rolling)
	if od == nd {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	settled := od != "" && od == o // every pod ran old's template
	if settled && nd != "" && strings.HasSuffix(n, unobserved) && cur.GetGeneration() == old.GetGeneration()+1 {
		if r.m == nil {
			r.m = map[types.UID]release{}
		}
		r.m[cur.GetUID()] = release{generation: cur.GetGeneration(), version: cur.GetResourceVersion()}
		return
	}
	delete(r.m, cur.GetUID())
}

// Forget drops a deleted workload.
func (r *Releases) Forget(obj client.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, obj.GetUID())
}

// Settled reports whether every pod of obj runs its current template, as
// its status says (its controller observed its generation and counts no
// pod of another template); false for a workload Template knows nothing
// of.
func Settled(obj client.Object) bool {
	t := Template(obj)
	return t != "" && strings.TrimRight(t, unobserved+rolling) == t
}

// Since returns the resourceVersion of the write that made obj's current
// pod template, seen as it was made; "" when not known (or obj's spec
// changed since, or its template change no longer rolls every pod).
func (r *Releases) Since(obj client.Object) string {
	if Template(obj) == "" {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if rel, ok := r.m[obj.GetUID()]; ok && rel.generation == obj.GetGeneration() {
		return rel.version
	}
	return ""
}
