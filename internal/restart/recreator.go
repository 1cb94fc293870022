package restart

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/note"
)

// ReasonRecreateBlocked is the Warning Event of a Job deleted to be
// re-created whose deletion does not finish (finalizers of its own).
const ReasonRecreateBlocked = "RecreateBlocked"

// ErrorOperation is the operation label of metrics.Errors for a step of a
// re-creation that failed, and for a deletion reported blocked.
const ErrorOperation = "recreate"

// writeTimeout bounds the writes after a Job's delete: they run even when
// the reconcile's context is cancelled (watcher stopping), so that the new
// Job is created now rather than by the next replica.
const writeTimeout = 10 * time.Second

// Outcome says how far Begin went.
type Outcome int

const (
	// Recreated: the new Job was created (Begin returns it).
	Recreated Outcome = iota
	// Pending: the old Job was deleted (or is being deleted); the new one
	// is created later, by Resume.
	Pending
)

// ErrInProgress says that a re-creation of the Job is in progress already
// (its record exists): Resume finishes it first.
var ErrInProgress = errors.New("a re-creation of the job is in progress")

// Recreator re-creates Jobs through records kept in the cluster (see
// Recreation). It remembers, per Job, the re-creations it knows of and
// their backoff; everything else is read from the API server.
type Recreator struct {
	// Client writes the records and the Jobs.
	Client client.Client
	// Fresh reads from the API server, not a cache.
	Fresh client.Reader
	// Namespace is watcher's own namespace, where the records are.
	Namespace string
	// Recorder sends the Warning Events (RecreateBlocked).
	Recorder events.EventRecorder
	// Bind returns the guards' state annotation to set on the new Job
	// created, from the state Begin was given; nil or "": none.
	Bind func(state []byte, job *batchv1.Job) string

	// now is the clock of the backoff.
	now func() time.Time

	mu    sync.Mutex
	known map[types.NamespacedName]*progress
	wake  chan event.TypedGenericEvent[types.NamespacedName]
}

// progress is what a Recreator remembers of one Job.
type progress struct {
	// record: a record exists (false: the Job was looked up, none found).
	record bool
	// attempt counts the looks at a deletion that did not finish.
	attempt int
	// next is when to look again.
	next time.Time
}

// NewRecreator returns a Recreator; see its fields.
func NewRecreator(c client.Client, fresh client.Reader, namespace string, rec events.EventRecorder) *Recreator {
	return &Recreator{Client: c, Fresh: fresh, Namespace: namespace, Recorder: rec, now: time.Now,
		known: map[types.NamespacedName]*progress{}, wake: make(chan event.TypedGenericEvent[types.NamespacedName], 1024)}
}

// Wakes sends the Jobs to look at again: each re-creation Begin left
// pending, and every record found by List.
func (r *Recreator) Wakes() <-chan event.TypedGenericEvent[types.NamespacedName] { return r.wake }

// Begin re-creates old, read from the API server, as job (RecreatedJob):
// it writes the record, deletes old (only while its UID and
// resourceVersion are those read) and, unless old is still being deleted,
// creates job at once. Nothing waits: a deletion that does not finish now
// is finished by Resume, woken by old's events and a backoff.
//
//	step                           on failure
//	write the record               exists: ErrInProgress (Resume first);
//	                               too large: ErrTooLarge; else the error
//	delete old                     conflict or gone: the record deleted, the
//	                               error returned (decide again); else kept
//	create job (Resume's steps)    kept: Pending, finished later (the
//	                               error is logged; Begin returns none:
//	                               the restart is made)
func (r *Recreator) Begin(ctx context.Context, old, job *batchv1.Job, state []byte) (Outcome, *batchv1.Job, error) {
	key := types.NamespacedName{Namespace: old.Namespace, Name: old.Name}
	rc := NewRecreation(old, job, state)
	cm, err := rc.Record(r.Namespace)
	if err != nil {
		return Pending, nil, err
	}
	if err := r.Client.Create(ctx, cm); err != nil {
		if apierrors.IsAlreadyExists(err) {
			r.remember(key)
			r.wakeUp(key)
			return Pending, nil, ErrInProgress
		}
		metrics.Errors.WithLabelValues("create").Inc()
		return Pending, nil, fmt.Errorf("keep job %s: %w", key, err)
	}
	r.remember(key)
	uid, rv := old.UID, old.ResourceVersion
	err = r.Client.Delete(ctx, old, client.PropagationPolicy(metav1.DeletePropagationBackground),
		client.Preconditions{UID: &uid, ResourceVersion: &rv})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		// Not deleted by watcher: nothing to create, and nothing in
		// progress once the record is gone (the caller decides again).
		if r.drop(context.WithoutCancel(ctx), cm) == nil {
			r.forget(key)
		}
		return Pending, nil, fmt.Errorf("delete job %s: %w", key, err)
	}
	if err != nil {
		// Maybe deleted: the record stays, and Resume finds out.
		metrics.Errors.WithLabelValues("delete").Inc()
		r.wakeUp(key)
		return Pending, nil, fmt.Errorf("delete job %s: %w", key, err)
	}
	// The Job is deleted: from here on the re-creation is decided, and
	// watcher stopping must not leave it half done.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	created, waiting, err := r.advance(wctx, rc, cm)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Job deleted to restart it; creating it again later", "job", key.String())
	}
	if err != nil || waiting || created == nil {
		r.wakeUp(key)
		return Pending, nil, nil
	}
	r.forget(key)
	return Recreated, created, nil
}

// Known tells whether a re-creation of the Job key may be in progress: one
// Begin left pending or List found, not finished yet.
func (r *Recreator) Known(key types.NamespacedName) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.known[key]
	return ok && p.record
}

// Resume carries on the re-creation of the Job key, if it has a record.
// It returns handled = false when there is none or it is over (the caller
// then reconciles the Job as usual), and how long to wait before looking
// again while the old Job is still being deleted: a backoff per Job
// (Backoff), so that a Job kept from being deleted costs no more than a
// few reads, however often it is touched. At BlockedAfter looks, a
// Warning Event RecreateBlocked on the old Job says why.
// A Job with no record is looked up at most once a MaxBackoff.
func (r *Recreator) Resume(ctx context.Context, key types.NamespacedName) (after time.Duration, handled bool, err error) {
	if r == nil {
		return 0, false, nil
	}
	now := r.now()
	r.mu.Lock()
	p := r.known[key]
	if p != nil && now.Before(p.next) {
		r.mu.Unlock()
		return p.next.Sub(now), p.record, nil
	}
	r.mu.Unlock()

	cm := &corev1.ConfigMap{}
	err = r.Fresh.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: RecordName(key.Namespace, key.Name)}, cm)
	if apierrors.IsNotFound(err) {
		r.mu.Lock()
		r.known[key] = &progress{next: now.Add(MaxBackoff)}
		r.mu.Unlock()
		return 0, false, nil
	}
	if err != nil {
		metrics.Errors.WithLabelValues("get").Inc()
		return 0, true, fmt.Errorf("get recreation record of job %s: %w", key, err)
	}
	rc, err := FromRecord(cm)
	if err != nil {
		// Not a record watcher wrote: never acted on, removed.
		ctrl.LoggerFrom(ctx).Error(err, "Dropping an unreadable Job re-creation record", "record", cm.Namespace+"/"+cm.Name)
		metrics.Errors.WithLabelValues("record").Inc()
		r.drop(ctx, cm)
		r.forget(key)
		return 0, false, nil
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	_, waiting, err := r.advance(wctx, rc, cm)
	switch {
	case err != nil:
		return 0, true, err
	case !waiting:
		r.forget(key)
		return 0, false, nil
	}
	r.mu.Lock()
	if p = r.known[key]; p == nil || !p.record {
		p = &progress{record: true}
		r.known[key] = p
	}
	after = Backoff(p.attempt)
	p.attempt++
	p.next = now.Add(after)
	blocked := p.attempt == BlockedAfter
	r.mu.Unlock()
	if blocked {
		r.blocked(ctx, rc)
	}
	return after, true, nil
}

// blocked reports a re-creation whose old Job is not deleted after
// BlockedAfter looks.
func (r *Recreator) blocked(ctx context.Context, rc Recreation) {
	old := &batchv1.Job{}
	if err := r.Fresh.Get(ctx, rc.Job, old); err != nil || old.UID != rc.OldUID {
		return
	}
	metrics.Errors.WithLabelValues(ErrorOperation).Inc()
	ctrl.LoggerFrom(ctx).Info("Job deleted to re-create it is still being deleted; its re-creation waits", "job", rc.Job.String(), "finalizers", old.Finalizers)
	if r.Recorder != nil {
		r.Recorder.Eventf(old, nil, corev1.EventTypeWarning, ReasonRecreateBlocked, "Restart", "%s",
			note.Truncate(fmt.Sprintf("Deleted to restart it, but still being deleted (finalizers: %v): the new Job is created once it is gone", old.Finalizers)))
	}
}

// List finds every record (at start, on the leader) and wakes its Job, so
// that the re-creations a previous process or leader left are finished.
func (r *Recreator) List(ctx context.Context) error {
	var list corev1.ConfigMapList
	if err := r.Fresh.List(ctx, &list, client.InNamespace(r.Namespace), client.HasLabels{RecreationLabel}); err != nil {
		return fmt.Errorf("list recreation records: %w", err)
	}
	for i := range list.Items {
		ns, name, ok := cut(list.Items[i].Annotations[RecreationOfAnnotation])
		if !ok {
			continue
		}
		key := types.NamespacedName{Namespace: ns, Name: name}
		r.remember(key)
		select {
		case r.wake <- event.TypedGenericEvent[types.NamespacedName]{Object: key}:
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

// advance takes the steps of rc (NextStep) until it is over (created: the
// Job created, when this call created it) or waits on the old Job's
// deletion. Every write is conditioned on what was read, so replicas
// advancing one record at once do each step once.
func (r *Recreator) advance(ctx context.Context, rc Recreation, cm *corev1.ConfigMap) (created *batchv1.Job, waiting bool, err error) {
	log := ctrl.LoggerFrom(ctx)
	var cur *batchv1.Job
	read := true  // the Job is read again only when a write did not say what it is
	for range 8 { // at most: delete, create, mark, release, drop
		if read {
			cur = &batchv1.Job{}
			if err := r.Fresh.Get(ctx, rc.Job, cur); apierrors.IsNotFound(err) {
				cur = nil
			} else if err != nil {
				metrics.Errors.WithLabelValues("get").Inc()
				return nil, false, fmt.Errorf("get job %s: %w", rc.Job, err)
			}
			read = false
		}
		step := NextStep(rc, cur)
		log.V(1).Info("Job re-creation step", "job", rc.Job.String(), "step", step.String())
		var err error
		switch step {
		case StepWait:
			return nil, true, nil
		case StepDelete:
			err = r.Client.Delete(ctx, cur, client.PropagationPolicy(metav1.DeletePropagationBackground),
				client.Preconditions{UID: &rc.OldUID, ResourceVersion: &rc.OldVersion})
			if apierrors.IsConflict(err) {
				// Changed since it was decided on: decided again.
				log.Info("Job changed before its re-creation; not re-creating it", "job", rc.Job.String())
				return nil, false, r.drop(ctx, cm)
			}
			read = true
		case StepCreate:
			job := rc.New.DeepCopy()
			err = r.Client.Create(ctx, job)
			switch {
			case err == nil:
				created, cur = job, job
			case apierrors.IsAlreadyExists(err):
				err, read = nil, true
			case apierrors.IsNotFound(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
				log.Info("Namespace of a Job to re-create is gone; not re-creating it", "job", rc.Job.String())
				return nil, false, r.drop(ctx, cm)
			}
		case StepMark:
			if err = r.mark(ctx, cm); err == nil {
				rc.Created = true
			}
		case StepRelease:
			err = r.release(ctx, rc, cur) // cur is the Job the patch returns
		case StepAbandon:
			log.Info("Another Job took the name of a Job being re-created; not creating it", "job", rc.Job.String(), "uid", string(cur.UID))
			return nil, false, r.drop(ctx, cm)
		case StepDrop:
			return created, false, r.drop(ctx, cm)
		}
		if err != nil {
			metrics.Errors.WithLabelValues(ErrorOperation).Inc()
			return nil, false, fmt.Errorf("re-create job %s: %s: %w", rc.Job, step, err)
		}
	}
	return nil, false, fmt.Errorf("re-create job %s: too many steps", rc.Job)
}

// mark marks the record cm created, while it is the record read.
func (r *Recreator) mark(ctx context.Context, cm *corev1.ConfigMap) error {
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": cm.ResourceVersion, "annotations": map[string]string{RecreationCreatedAnnotation: "true"},
	}})
	return r.Client.Patch(ctx, cm, client.RawPatch(types.MergePatchType, b))
}

// release removes RecreationFinalizer from job, the new Job, and sets the
// guards' state on it, bound to its UID.
func (r *Recreator) release(ctx context.Context, rc Recreation, job *batchv1.Job) error {
	meta := map[string]any{
		"resourceVersion": job.ResourceVersion,
		"finalizers":      slices.DeleteFunc(slices.Clone(job.Finalizers), func(f string) bool { return f == RecreationFinalizer }),
	}
	if r.Bind != nil && len(rc.State) > 0 {
		if v := r.Bind(rc.State, job); v != "" {
			meta["annotations"] = map[string]string{guard.StateAnnotation: v}
		}
	}
	b, _ := json.Marshal(map[string]any{"metadata": meta})
	return r.Client.Patch(ctx, job, client.RawPatch(types.MergePatchType, b))
}

// drop deletes the record cm, while it is the record read.
func (r *Recreator) drop(ctx context.Context, cm *corev1.ConfigMap) error {
	err := r.Client.Delete(ctx, cm, client.Preconditions{UID: &cm.UID})
	if err != nil && !apierrors.IsNotFound(err) {
		metrics.Errors.WithLabelValues("delete").Inc()
		return fmt.Errorf("delete recreation record %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return nil
}

func (r *Recreator) remember(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.known[key]; p == nil || !p.record {
		r.known[key] = &progress{record: true}
	}
}

func (r *Recreator) forget(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.known, key)
}

// Gone forgets the Job key once the cache no longer has it and no record
// is known for it (a Job looked up only because it was being deleted).
func (r *Recreator) Gone(key types.NamespacedName) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.known[key]; p != nil && !p.record {
		delete(r.known, key)
	}
}

// wakeUp asks for key to be looked at again soon; a full queue drops it
// (the old Job's delete event wakes it too).
func (r *Recreator) wakeUp(key types.NamespacedName) {
	select {
	case r.wake <- event.TypedGenericEvent[types.NamespacedName]{Object: key}:
	default:
	}
}

// Lister returns the runnable that lists the records at start (List),
// trying again until it succeeds; on the leader only when needLeader.
func (r *Recreator) Lister(needLeader bool) manager.Runnable {
	return lister{r: r, needLeader: needLeader}
}

type lister struct {
	r          *Recreator
	needLeader bool
}

func (l lister) NeedLeaderElection() bool { return l.needLeader }

// Start implements manager.Runnable.
func (l lister) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("recreations")
	for attempt := 0; ; attempt++ {
		err := l.r.List(ctx)
		if err == nil {
			return nil
		}
		log.Error(err, "Cannot list the Job re-creations in progress; trying again")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(Backoff(attempt)):
		}
	}
}
