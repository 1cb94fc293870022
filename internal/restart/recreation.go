package restart

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A Job re-creation deletes a Job and creates it again under the same
// name. Between the two, the Job to create is kept in the cluster, in a
// ConfigMap of watcher's own namespace (its record), written before the
// delete: whichever replica runs next (the same one, the next leader, the
// same process after a restart) finishes it from there, and nothing waits
// inside a reconcile for a deletion to finish.
//
// The record, and what is set on the Job it creates:
//
//	where                         key                          value
//	record label                  RecreationLabel              "true" (listed at start)
//	record annotation             RecreationOfAnnotation       the Job, "namespace/name"
//	record annotation             RecreationUIDAnnotation      the UID of the Job deleted
//	record annotation             RecreationVersionAnnotation  its resourceVersion when decided on
//	record annotation             RecreationCreatedAnnotation  "true" once the new Job exists
//	record data                   RecreationJobKey             the Job to create (JSON)
//	record data                   RecreationStateKey           the guards' state to bind to it
//	new Job annotation            RecreatedFromAnnotation      the UID of the Job it replaces
//	new Job finalizer             RecreationFinalizer          until the record is marked created
//
// The finalizer makes the re-creation happen once: the new Job cannot be
// removed (by its ttlSecondsAfterFinished, say) before its record says it
// was created, so a Job of that name that is gone always means "not created
// yet", never "created, ran, and removed".
const (
	RecreationLabel             = "watcher.dev/recreation"
	RecreationOfAnnotation      = "watcher.dev/recreation-of"
	RecreationUIDAnnotation     = "watcher.dev/recreation-uid"
	RecreationVersionAnnotation = "watcher.dev/recreation-version"
	RecreationCreatedAnnotation = "watcher.dev/recreation-created"
	RecreationJobKey            = "job.json"
	RecreationStateKey          = "state"
	RecreatedFromAnnotation     = "watcher.dev/recreated-from"
	RecreationFinalizer         = "watcher.dev/recreation"
)

// MaxRecreationBytes bounds the Job a record keeps (its JSON): a Job over
// it is not re-created (the API server's own limit on an object is about
// 1.5 MiB, a ConfigMap's 1 MiB).
const MaxRecreationBytes = 512 << 10

// ErrTooLarge says that a Job is too large to be kept in a record.
var ErrTooLarge = errors.New("job too large to keep while it is re-created")

// Recreation is one Job re-creation, as its record keeps it.
type Recreation struct {
	// Job names the Job re-created.
	Job types.NamespacedName
	// OldUID and OldVersion are the UID and resourceVersion of the Job
	// decided on: only that Job is deleted.
	OldUID     types.UID
	OldVersion string
	// Created: the new Job exists (it carries RecreatedFromAnnotation).
	Created bool
	// New is the Job to create.
	New *batchv1.Job
	// State is the guards' state to bind to the new Job (opaque here).
	State []byte
}

// NewRecreation returns the re-creation of old by job (RecreatedJob):
// job is marked with old's UID and carries RecreationFinalizer.
func NewRecreation(old, job *batchv1.Job, state []byte) Recreation {
	job = job.DeepCopy()
	if job.Annotations == nil {
		job.Annotations = map[string]string{}
	}
	job.Annotations[RecreatedFromAnnotation] = string(old.UID)
	if !slices.Contains(job.Finalizers, RecreationFinalizer) {
		job.Finalizers = append(job.Finalizers, RecreationFinalizer)
	}
	return Recreation{Job: types.NamespacedName{Namespace: old.Namespace, Name: old.Name},
		OldUID: old.UID, OldVersion: old.ResourceVersion, New: job, State: state}
}

// RecordName is the name of the record of the re-creation of the Job
// namespace/name: one record per Job name, so that two replicas never
// re-create one Job at once (the second create of the record fails).
func RecordName(namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return "watcher-recreate-" + hex.EncodeToString(sum[:10])
}

// Record returns the record of rc in namespace (watcher's own); ErrTooLarge
// when its Job is over MaxRecreationBytes.
func (rc Recreation) Record(namespace string) (*corev1.ConfigMap, error) {
	doc, err := json.Marshal(rc.New)
	if err != nil {
		return nil, fmt.Errorf("keep job %s: %w", rc.Job, err)
	}
	if len(doc) > MaxRecreationBytes {
		return nil, fmt.Errorf("keep job %s: %d bytes, over %d: %w", rc.Job, len(doc), MaxRecreationBytes, ErrTooLarge)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: RecordName(rc.Job.Namespace, rc.Job.Name),
			Labels: map[string]string{RecreationLabel: "true"},
			Annotations: map[string]string{
				RecreationOfAnnotation: rc.Job.String(), RecreationUIDAnnotation: string(rc.OldUID),
				RecreationVersionAnnotation: rc.OldVersion,
			},
		},
		Data: map[string]string{RecreationJobKey: string(doc)},
	}
	if rc.Created {
		cm.Annotations[RecreationCreatedAnnotation] = "true"
	}
	if len(rc.State) > 0 {
		cm.Data[RecreationStateKey] = string(rc.State)
	}
	return cm, nil
}

// FromRecord reads a record written by Record.
func FromRecord(cm *corev1.ConfigMap) (Recreation, error) {
	a := cm.Annotations
	var rc Recreation
	ns, name, ok := cut(a[RecreationOfAnnotation])
	if !ok || a[RecreationUIDAnnotation] == "" {
		return rc, fmt.Errorf("read recreation record %s/%s: no job named", cm.Namespace, cm.Name)
	}
	if len(cm.Data[RecreationJobKey]) > MaxRecreationBytes {
		return rc, fmt.Errorf("read recreation record %s/%s: %w", cm.Namespace, cm.Name, ErrTooLarge)
	}
	rc.Job = types.NamespacedName{Namespace: ns, Name: name}
	rc.OldUID, rc.OldVersion = types.UID(a[RecreationUIDAnnotation]), a[RecreationVersionAnnotation]
	rc.Created = a[RecreationCreatedAnnotation] == "true"
	rc.New = &batchv1.Job{}
	if err := json.Unmarshal([]byte(cm.Data[RecreationJobKey]), rc.New); err != nil {
		return rc, fmt.Errorf("read recreation record %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	if rc.New.Namespace != ns || rc.New.Name != name {
		return rc, fmt.Errorf("read recreation record %s/%s: its job is not %s", cm.Namespace, cm.Name, rc.Job)
	}
	if s, ok := cm.Data[RecreationStateKey]; ok {
		rc.State = []byte(s)
	}
	return rc, nil
}

// cut splits "namespace/name".
func cut(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return s[:i], s[i+1:], i > 0 && i < len(s)-1
		}
	}
	return "", "", false
}

// Step is what to do next for a re-creation.
type Step int

// The steps, in the order a re-creation goes through them.
const (
	// StepDelete: delete the old Job (the record was written, the delete
	// not answered yet).
	StepDelete Step = iota
	// StepWait: the old Job is being deleted (finalizers of its own): come
	// back later, on its delete event or after a backoff.
	StepWait
	// StepCreate: create the new Job.
	StepCreate
	// StepMark: the new Job exists; mark the record created.
	StepMark
	// StepRelease: remove RecreationFinalizer from the new Job.
	StepRelease
	// StepDrop: delete the record; the re-creation is over.
	StepDrop
	// StepAbandon: another Job took the name before the new one was
	// created (a person, a GitOps tool): delete the record, create nothing.
	StepAbandon
)

var stepNames = [...]string{"delete", "wait", "create", "mark", "release", "drop", "abandon"}

func (s Step) String() string { return stepNames[s] }

// NextStep decides what to do for rc, given cur, the Job of its name as
// the API server holds it now (nil: none):
//
//	record   the Job of the name                            step
//	pending  none                                           create
//	pending  the old one (OldUID), not being deleted        delete
//	pending  the old one, being deleted                     wait
//	pending  one marked RecreatedFromAnnotation = OldUID    mark
//	pending  any other                                      abandon
//	created  marked, with RecreationFinalizer               release
//	created  anything else (none included)                  drop
//
// A Job is created only while the record is pending, and the record is
// marked created before the new Job can go away: so it is created once.
func NextStep(rc Recreation, cur *batchv1.Job) Step {
	marked := cur != nil && cur.UID != rc.OldUID && cur.Annotations[RecreatedFromAnnotation] == string(rc.OldUID)
	switch {
	case rc.Created && marked && slices.Contains(cur.Finalizers, RecreationFinalizer):
		return StepRelease
	case rc.Created:
		return StepDrop
	case cur == nil:
		return StepCreate
	case cur.UID == rc.OldUID && cur.DeletionTimestamp == nil:
		return StepDelete
	case cur.UID == rc.OldUID:
		return StepWait
	case marked:
		return StepMark
	default:
		return StepAbandon
	}
}

// Backoff is how long to wait before looking again at a re-creation whose
// old Job is still being deleted, after attempt looks (from 0): one second,
// doubling, at most MaxBackoff.
func Backoff(attempt int) time.Duration {
	if attempt >= 9 { // 2^9 s is past MaxBackoff
		return MaxBackoff
	}
	return min(time.Second<<attempt, MaxBackoff)
}

// MaxBackoff bounds Backoff: a Job whose deletion never finishes is looked
// at every five minutes (and at each of its events).
const MaxBackoff = 5 * time.Minute

// BlockedAfter is the look (attempt) at which a deletion that has not
// finished is reported: after about a minute (1+2+...+32 s).
const BlockedAfter = 6
