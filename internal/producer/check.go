package producer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/watcher-dev/watcher/internal/object"
)

// ForceSyncAnnotation is the annotation External Secrets documents to ask
// an ExternalSecret to sync now: any change of its value changes the
// version ESO computes (Version), so ESO syncs again.
const ForceSyncAnnotation = "force-sync"

// Check returns, for the given sources (one workload's ConfigMaps and
// Secrets), the verdict of each producer of each source that has one,
// sorted by source then producer; sources with none are absent. The known
// kinds are looked up in the informers' caches by index (no request); a
// source none of them produces has its controller owner read if
// Options.Owners is set (a bounded number of GETs per call, see Owners).
// A nil Follower returns nil.
func (f *Follower) Check(ctx context.Context, sources []object.Ref) []Verdict {
	if f == nil {
		return nil
	}
	var out []Verdict
	reads := 0
	for _, src := range sources {
		vs := f.known(src)
		if len(vs) == 0 && reads < maxOwnerReads {
			v, ok, read := f.opts.Owners.verdict(ctx, src)
			if read {
				reads++
			}
			if ok {
				vs = append(vs, v)
			}
		}
		out = append(out, vs...)
	}
	slices.SortFunc(out, func(a, b Verdict) int {
		return cmp.Or(object.Compare(a.Source, b.Source), object.Compare(a.Producer, b.Producer))
	})
	return slices.CompactFunc(out, func(a, b Verdict) bool { return a.Source == b.Source && a.Producer == b.Producer })
}

// known returns the verdicts of the known producers of src, at most
// MaxPerSource, from the caches.
func (f *Follower) known(src object.Ref) []Verdict {
	if src.Kind != "Secret" {
		return nil // the known kinds all produce Secrets
	}
	var out []Verdict
	seen := map[object.Ref]bool{}
	for _, a := range f.apis {
		for _, inf := range a.informers() {
			objs, err := inf.GetIndexer().ByIndex(targetIndex, src.Namespace+"/"+src.Name)
			if err != nil {
				continue
			}
			list := make([]*unstructured.Unstructured, 0, len(objs))
			for _, o := range objs {
				if u, ok := o.(*unstructured.Unstructured); ok {
					list = append(list, u)
				}
			}
			slices.SortFunc(list, func(x, y *unstructured.Unstructured) int { return cmp.Compare(x.GetName(), y.GetName()) })
			for _, u := range list {
				p := object.Ref{Kind: a.kind.gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}
				if seen[p] {
					continue
				}
				if len(seen) == MaxPerSource {
					return out
				}
				seen[p] = true
				out = append(out, f.judge(src, p, a.kind, u))
			}
		}
	}
	return out
}

// judge applies k's rule to u, the producer p of src; an ExternalSecret
// sent a force-sync that the cache has not seen yet is Progressing.
func (f *Follower) judge(src, p object.Ref, k *kind, u *unstructured.Unstructured) Verdict {
	f.mu.Lock()
	before, forced := f.forced[p]
	if forced && before != u.GetResourceVersion() {
		delete(f.forced, p) // the cache has seen the force-sync (or a later write)
		forced = false
	}
	f.mu.Unlock()
	if forced {
		return Verdict{Source: src, Producer: p, State: Progressing, Reason: ReasonForceSync,
			Message: "force-sync sent; the ExternalSecret's change is not seen yet"}
	}
	state, reason, message := k.current(u)
	return Verdict{Source: src, Producer: p, State: state, Reason: reason, Message: message}
}

// ErrNotFollowed is returned by ForceSync when ExternalSecrets are not
// followed (their CRD is not served, or the Follower is nil).
var ErrNotFollowed = errors.New("ExternalSecrets are not followed")

// ErrSyncsOnce is returned by ForceSync for an ExternalSecret External
// Secrets syncs only once (refreshPolicy CreatedOnce, or refreshInterval
// 0): it ignores a force-sync.
var ErrSyncsOnce = errors.New("the ExternalSecret is synced only once; a force-sync does nothing")

// ForceSync asks the ExternalSecret producer to sync now: it sets its
// force-sync annotation (ForceSyncAnnotation) to the current Unix time by
// a merge patch of its metadata only. From then on Check calls it
// Progressing until External Secrets reports a sync of the new version
// (the annotation moved the version; until the cache sees the patch, the
// Follower remembers it). Two calls within one second write one value:
// the second changes nothing.
func (f *Follower) ForceSync(ctx context.Context, producer object.Ref) error {
	if producer.Kind != externalSecretV1.gvk.Kind {
		return fmt.Errorf("force-sync %s: only an ExternalSecret can be asked to sync", producer)
	}
	var a *api
	if f != nil {
		a = f.apis[0] // kinds[0], ExternalSecret v1
	}
	if a == nil || !a.Enabled() {
		return fmt.Errorf("force-sync %s: %w", producer, ErrNotFollowed)
	}
	before := ""
	for _, inf := range a.informers() {
		if o, ok, _ := inf.GetIndexer().GetByKey(producer.Namespace + "/" + producer.Name); ok {
			u, _ := o.(*unstructured.Unstructured)
			if u != nil && syncsOnce(u) {
				return fmt.Errorf("force-sync %s: %w", producer, ErrSyncsOnce)
			}
			if u != nil {
				before = u.GetResourceVersion()
			}
		}
	}
	now := f.opts.Now
	if now == nil {
		now = timeNow
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, ForceSyncAnnotation, strconv.FormatInt(now().Unix(), 10))
	gvr := a.kind.gvk.GroupVersion().WithResource(a.kind.resource)
	got, err := f.opts.Dynamic.Resource(gvr).Namespace(producer.Namespace).Patch(ctx, producer.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("force-sync %s: %w", producer, err)
	}
	if before != "" && got.GetResourceVersion() != before {
		f.mu.Lock()
		f.forced[producer] = before
		f.mu.Unlock()
	}
	f.opts.Log.V(1).Info("Asked an ExternalSecret to sync", "externalSecret", producer.Namespace+"/"+producer.Name)
	return nil
}
