// Package producer follows the controllers that write the ConfigMaps and
// Secrets workloads read and report their progress (producers), so that a
// change is closed only once every producer feeding a workload has landed
// what it is writing (issue 30, "wait for the producers").
//
// A producer is one of three known kinds, followed by informers while
// their CRDs are served, or any other controller owner of the source that
// reports kstatus-style status, read on demand. Each is judged by a pure
// rule from its metadata and status only (Trim keeps nothing else: never
// an ExternalSecret's data spec nor a SealedSecret's ciphertext):
//
//	kind                      produces          Current when                        Failed when
//	ExternalSecret            spec.target.name  Ready=True and                      Ready=False (ESO writes
//	(external-secrets.io/v1)  (default: its     status.syncedResourceVersion ==     reason SecretSyncedError)
//	                          name; none when   the version ESO computes now
//	                          creationPolicy    (Version: generation, hash of
//	                          is None)          labels and annotations); or
//	                                            Ready=True, synced once, when ESO
//	                                            never syncs it again
//	                                            (refreshPolicy CreatedOnce, or
//	                                            refreshInterval 0)
//	Certificate               spec.secretName   Ready=True at the generation (the   Issuing=False at the generation
//	(cert-manager.io/v1)                        condition's observedGeneration)     with a reason other than Issued
//	                                            and no Issuing=True                 (the failed request's: Failed,
//	                                                                                Denied, InvalidRequest...)
//	SealedSecret              the Secret of     Synced=True and                     Synced=False at the generation
//	(bitnami.com/v1alpha1)    its name          status.observedGeneration ==
//	                                            generation
//	controller owner of the   the source        Ready=True and observedGeneration   Ready=False or Stalled=True at
//	source with a Ready       (its controller   == generation (status's, else the   the generation (Reconciling=True
//	condition and an          ownerReference)   Ready condition's)                  is Progressing)
//	observedGeneration
//
// Anything else is Progressing: no status yet, a status for an older
// generation or version, Ready=Unknown, a Certificate being issued or
// whose Ready=False says why it will be issued again (DoesNotExist,
// Expired, Renewing...: cert-manager's trigger then issues it), a
// malformed status. An owner without a Ready condition or without an
// observedGeneration (a Deployment owning a ConfigMap) is not a producer.
// Comparisons use generations and versions only, never a clock.
//
// Everything a tenant writes is bounded: condition messages are quoted and
// cut (maxMessage), at most MaxPerSource producers are judged per source,
// at most maxOwnerReads owners are read per Check.
package producer

import (
	"github.com/watcher-dev/watcher/internal/object"
)

// State is how far a producer is with what it produces.
type State int

// The states of a producer.
const (
	// Progressing: the producer has not yet written what it is asked to
	// (or says nothing judgeable yet); the change waits.
	Progressing State = iota
	// Current: the producer reports that its source holds what it is
	// asked to produce now.
	Current
	// Failed: the producer reports an error; the change is held until a
	// person releases it or the producer recovers.
	Failed
)

// String names the state, for logs and messages.
func (s State) String() string {
	switch s {
	case Current:
		return "Current"
	case Failed:
		return "Failed"
	}
	return "Progressing"
}

// Verdict is the state of one producer of one source.
type Verdict struct {
	// Source is the ConfigMap or Secret produced.
	Source object.Ref
	// Producer is the object producing it (Kind, namespace, name).
	Producer object.Ref
	State    State
	// Reason is a short machine reason, one of the Reason… constants.
	Reason string
	// Message is the evidence for a person: generations, versions, the
	// producer's condition reason and message (quoted, cut). Never any
	// Secret data.
	Message string
}

// The reasons of a Verdict.
const (
	ReasonCurrent         = "Current"         // the producer is current
	ReasonNoStatus        = "NoStatus"        // no status, or not the condition judged
	ReasonMalformed       = "MalformedStatus" // a status that cannot be read
	ReasonOldGeneration   = "OldGeneration"   // the status is for an older generation
	ReasonNotSynced       = "NotSynced"       // ExternalSecret: synced version is not the current one
	ReasonForceSync       = "ForceSyncSent"   // ExternalSecret: ForceSync sent, not yet seen
	ReasonNotReady        = "NotReady"        // Ready (or Synced) is not True yet
	ReasonIssuing         = "Issuing"         // Certificate: an issuance is in progress
	ReasonFailed          = "ProducerFailed"  // the producer reports an error
	ReasonOwnerUnreadable = "OwnerUnreadable" // a generic owner could not be read
)

// MaxPerSource bounds the producers judged for one source: several
// Certificates or ExternalSecrets naming one Secret is a mistake (they
// overwrite each other), and a tenant must not make one Check long.
const MaxPerSource = 4

// maxMessage bounds what is quoted of a producer's condition message.
const maxMessage = 200
