package snapshot

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/evict"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/pin"
)

// rolloutsHashLabel is the label of Argo Rollouts' ReplicaSets and pods
// that pod-template-hash is of a Deployment's.
const rolloutsHashLabel = "rollouts-pod-template-hash"

// podsOf returns the label selector of the pods of a revision: a
// ReplicaSet's by its pod-template-hash (an Argo Rollout's: its
// rollouts-pod-template-hash); a ControllerRevision's by
// controller-revision-hash, which is its name (StatefulSet) or its hash
// label (DaemonSet).
func podsOf(kind string, meta metav1.ObjectMeta) string {
	if kind == "ReplicaSet" {
		for _, k := range []string{appsv1.DefaultDeploymentUniqueLabelKey, rolloutsHashLabel} {
			if h := meta.Labels[k]; h != "" {
				return k + "=" + h
			}
		}
		return ""
	}
	values := []string{meta.Name}
	if h := meta.Labels[appsv1.ControllerRevisionHashLabelKey]; h != "" && h != meta.Name {
		values = append(values, h)
	}
	return appsv1.ControllerRevisionHashLabelKey + " in (" + strings.Join(values, ",") + ")"
}

// replaceFor is how long the replacement of a workload's unpinned pods
// waits without progress (no pod of the workload newer) before it gives
// up and leaves the rest as they are, reported.
const replaceFor = 10 * time.Minute

// podFacts is what the replacement knows of one pinned pod of the
// namespace (one carrying pin.PinnedLabel).
type podFacts struct {
	name    string
	created time.Time
	// pinned: it carries pin.PinsAnnotation; admitted: the admission
	// policy marked it (pin.Admitted).
	pinned, admitted bool
	terminating      bool
	ready            bool
	// ofRevision: of the revision looked at; ofWorkload: of its workload
	// (any of its revisions).
	ofRevision, ofWorkload bool
}

// replacement is what to do about the unpinned pods of one revision.
type replacement struct {
	// unpinned are the revision's pods up without the policy's mark (not
	// terminating), oldest first; proven how many of them (the oldest) came
	// up before a pod of the namespace was marked (the policy in force
	// since).
	unpinned []string
	proven   int
	// evict is the one to evict now ("" none).
	evict string
	// again: look again after the check period (a replacement under way
	// or to come); without, the pods unpinned are left as they are.
	again bool
	// stale: the workload has made no progress (no newer pod) for
	// replaceFor.
	stale bool
}

// replace decides what to do about the unpinned pods of a revision, from
// the pinned pods of its namespace, at now. A pod is unpinned when it
// carries pin.PinsAnnotation without pin.Admitted: the admission policy
// did not run when it was created (not in force yet: the API server loads
// a policy and its binding a second or more after they are written; or
// deleted; or its binding does not match). Its controller re-creates it,
// evicted, through admission: the policy rewrites the new pod, if it is
// in force. It is known to be in force when a pod of the namespace was
// marked after the unpinned pod came up (or in the same second: creation
// times are to the second): such a pod is "proven", and only a proven pod
// is evicted, so that a missing policy never has watcher evict pods that
// would come back unpinned. One pod of a workload at a time: none while
// one of its pods is terminating or a marked one is not Ready yet (a
// replacement starting).
//
//	unpinned pods of the revision  the workload's pods             decision
//	none                           -                               nothing
//	none proven                    -                               left, reported
//	proven                         one terminating, or one marked  wait, look again
//	                               and not Ready
//	proven                         same, and none newer for        left (given up)
//	                               replaceFor
//	proven                         settled                         evict the oldest, look again
//
// A replacement that came up unpinned again (the policy gone meanwhile) is
// newer than every mark, so not proven: the evictions are bounded by the
// pods that came up unpinned before a later one was marked.
func replace(pods []podFacts, now time.Time) replacement {
	var (
		r      replacement
		proof  time.Time // the newest mark
		newest time.Time // the newest pod of the workload
		busy   bool
		stray  []podFacts
	)
	for _, p := range pods {
		if p.admitted && p.created.After(proof) {
			proof = p.created
		}
		if p.ofWorkload {
			newest = maxTime(newest, p.created)
			busy = busy || p.terminating || (p.admitted && !p.ready)
		}
		if p.ofRevision && p.pinned && !p.admitted && !p.terminating {
			stray = append(stray, p)
		}
	}
	slices.SortFunc(stray, func(a, b podFacts) int {
		return cmp.Or(a.created.Compare(b.created), strings.Compare(a.name, b.name))
	})
	r.stale = now.Sub(newest) >= replaceFor
	for _, p := range stray {
		r.unpinned = append(r.unpinned, p.name)
		if !proof.IsZero() && !p.created.After(proof) {
			r.proven++
		}
	}
	switch {
	case r.proven == 0, busy && r.stale:
	case busy:
		r.again = true
	default:
		r.evict, r.again = r.unpinned[0], true
	}
	return r
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// unpinned looks at the pods of the pinned revision r: those the
// admission policy did not mark (pin.Admitted) came up reading the live
// objects. It has them re-created through admission, evicting one at a
// time (replace) with a Normal Event each, and looks again after the
// check period while a replacement is under way. It says so on the
// workload (Warning PodsUnpinned) when it evicts one and at its last
// look, and counts each pod once (watcher_unpinned_pods_total): when
// evicted, or when left as it is at the last look. Without the right to
// list pods it says nothing; without the right to evict them it reports
// them only.
func (o *Owners) unpinned(ctx context.Context, r revision) error {
	sel, err := labels.Parse(r.pods)
	if err != nil {
		return nil
	}
	// The revision's pods, as metadata: most looks end here, none unpinned.
	var own metav1.PartialObjectMetadataList
	own.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	if err := o.Fresh.List(ctx, &own, client.InNamespace(r.namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		if apierrors.IsForbidden(err) {
			o.Log.V(1).Info("Cannot list pods: pods that came up unpinned are not looked for", "namespace", r.namespace)
			return nil
		}
		return err
	}
	if !slices.ContainsFunc(own.Items, func(p metav1.PartialObjectMetadata) bool {
		return p.Annotations[pin.PinsAnnotation] != "" && p.Annotations[pin.Admitted] != "true"
	}) {
		return nil
	}
	// The pinned pods of the namespace: the revision's, its workload's
	// others (one replacement at a time) and any marked one (the proof
	// that the policy is in force).
	var pods corev1.PodList
	if err := o.Fresh.List(ctx, &pods, client.InNamespace(r.namespace), client.MatchingLabels{pin.PinnedLabel: "true"}); err != nil {
		return err
	}
	facts := make([]podFacts, 0, len(pods.Items))
	byName := map[string]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		byName[p.Name] = p
		facts = append(facts, o.factsOf(p, sel, r.workload.UID))
	}
	d := replace(facts, time.Now())
	if len(d.unpinned) == 0 {
		return nil
	}
	if d.again && d.evict == "" {
		o.lookAgain(r) // a replacement under way, said when it began
		return nil
	}
	why := ""
	if d.evict != "" {
		if why, err = o.replaceOne(ctx, r, byName[d.evict]); err != nil {
			return err
		}
		// Refused: tried again while the workload progresses, unless
		// watcher may not evict at all.
		d.again = why == "" || (!d.stale && !strings.HasPrefix(why, forbiddenPrefix))
	}
	if !d.again {
		metrics.UnpinnedPods.Add(float64(len(d.unpinned)))
	}
	o.reportUnpinned(r, d, why)
	if d.again {
		o.lookAgain(r)
	}
	return nil
}

// factsOf gathers what replace knows of pod p: sel selects the pods of
// the revision looked at, workload is its workload's UID.
func (o *Owners) factsOf(p *corev1.Pod, sel labels.Selector, workload types.UID) podFacts {
	f := podFacts{
		name: p.Name, created: p.CreationTimestamp.Time,
		pinned:      p.Annotations[pin.PinsAnnotation] != "",
		admitted:    p.Annotations[pin.Admitted] == "true",
		terminating: p.DeletionTimestamp != nil,
		ofRevision:  sel.Matches(labels.Set(p.Labels)),
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			f.ready = c.Status == corev1.ConditionTrue
		}
	}
	f.ofWorkload = f.ofRevision || o.workloadOf(p) == workload
	return f
}

// workloadOf returns the UID of the workload of pod p: its controller
// (StatefulSet, DaemonSet), or its ReplicaSet's as the pinned revisions'
// cache knows it; "" when unknown.
func (o *Owners) workloadOf(p *corev1.Pod) types.UID {
	c := metav1.GetControllerOf(p)
	if c == nil {
		return ""
	}
	if c.Kind != "ReplicaSet" {
		return c.UID
	}
	if rc := o.controllerOf(c.UID); rc != nil {
		return rc.UID
	}
	return ""
}

// forbiddenPrefix starts the why of an eviction watcher has no right to.
const forbiddenPrefix = "watcher may not evict pods"

// replaceOne evicts pod p of the revision r through the Eviction API (so
// that the API server honours its PodDisruptionBudgets), on the condition
// that it is still the pod looked at (its UID), counts it and says so
// (Normal UnpinnedPodReplaced). It returns why it could not ("" when
// evicted or gone): a budget that allows no disruption now, or a right
// watcher lacks; other errors are returned, to look again.
func (o *Owners) replaceOne(ctx context.Context, r revision, p *corev1.Pod) (string, error) {
	uid := p.UID
	e := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}}
	err := o.Client.SubResource("eviction").Create(ctx, p, e)
	switch budget, blocked := evict.Blocked(err); {
	case err == nil:
		metrics.UnpinnedPods.Inc()
		o.event(r, corev1.EventTypeNormal, ReasonUnpinnedPodReplaced,
			"Evicted pod %s of revision %s, which came up unpinned (reading the live ConfigMaps and Secrets), so that its controller re-creates it through the admission policy that pins pods, in force since", p.Name, r.name)
		return "", nil
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return "", nil // gone, or another pod by that name: looked at again
	case blocked:
		return "a PodDisruptionBudget allows no disruption now (" + budget + ")", nil
	case apierrors.IsForbidden(err):
		o.Log.V(1).Info("Cannot evict pods: pods that came up unpinned are reported, not replaced", "namespace", r.namespace)
		return forbiddenPrefix + " (create pods/eviction in namespace " + r.namespace + ")", nil
	default:
		return "", fmt.Errorf("evict pod %s/%s: %w", p.Namespace, p.Name, err)
	}
}

// reportUnpinned says, on the workload, that pods of revision r came up
// unpinned, and what is done about them (why: why the one to evict was
// not).
func (o *Owners) reportUnpinned(r revision, d replacement, why string) {
	var what string
	switch {
	case d.again && why == "":
		what = "replacing them one at a time through the Eviction API"
	case d.again:
		what = "replacing them one at a time through the Eviction API; the next waits: " + why
	case why != "":
		what = "left as they are: " + why
	case d.proven > 0:
		what = fmt.Sprintf("left as they are: the workload made no progress for %s", replaceFor)
	default:
		what = "left as they are: no pod marked since shows the policy in force (once it is, deleting them has them re-created through it)"
	}
	o.event(r, corev1.EventTypeWarning, ReasonPodsUnpinned,
		"%d pods of revision %s came up unpinned, reading the live ConfigMaps and Secrets: the admission policy that pins pods did not run for them (not yet in force when they were created, deleted, or its binding does not match); %s", len(d.unpinned), r.name, what)
}

// event records an Event on the workload of revision r.
func (o *Owners) event(r revision, eventType, reason, note string, args ...any) {
	if o.Recorder == nil {
		return
	}
	w := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: r.workload.APIVersion, Kind: r.workload.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: r.namespace, Name: r.workload.Name, UID: r.workload.UID}}
	o.Recorder.Eventf(w, nil, eventType, reason, "Pin", note, args...)
}

// lookAgain queues r to be looked at again after the check period.
func (o *Owners) lookAgain(r revision) {
	if o.q != nil {
		o.q.AddAfter(r, cmp.Or(o.CheckAfter, 10*time.Second))
	}
}

const (
	// ReasonPodsUnpinned says that pods of a pinned revision came up
	// unpinned.
	ReasonPodsUnpinned = "PodsUnpinned"
	// ReasonUnpinnedPodReplaced says that watcher evicted a pod that came
	// up unpinned, to have it re-created through admission.
	ReasonUnpinnedPodReplaced = "UnpinnedPodReplaced"
)
