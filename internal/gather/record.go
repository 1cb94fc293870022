package gather

import "github.com/watcher-dev/watcher/internal/plan"

// The states of a workload's record (Recorded.State).
const (
	RecordAbsent     = "absent"     // never adopted: adopted, no restart
	RecordCurrent    = "current"    // made with the installation's hash key
	RecordOtherKey   = "other-key"  // made with another key: adopted again, no restart
	RecordUnreadable = "unreadable" // not valid JSON: adopted again, no restart
	RecordUnknownKey = "unknown"    // present, but the hash key is not known
)

// Recorded is a workload's record as read.
type Recorded struct {
	// State is one of the Record states.
	State string
	// Record is the record to compare with: nil unless State is current
	// (or unknown, read as it is).
	Record plan.Record
	// Version is the newest resourceVersion of the objects Record was
	// made from (plan.ParseVersion), "" when not known.
	Version string
	// Err says why an unreadable record is.
	Err error
}

// Record reads the record in a workload's annotations ann, made with the
// hash key keyID (hash.Hasher.ID; "": not known). A record made with
// another hash key, or unreadable, is no record: the workload is adopted
// again, as new.
//
//	annotations                    state       record
//	no plan.RecordAnnotation       absent      nil
//	not a record                   unreadable  nil
//	keyID ""                       unknown     as written
//	plan.HashKeyAnnotation keyID   current     as written
//	another plan.HashKeyAnnotation other-key   nil
func Record(ann map[string]string, keyID string) Recorded {
	s, ok := ann[plan.RecordAnnotation]
	if !ok {
		return Recorded{State: RecordAbsent}
	}
	r, err := plan.ParseRecord(s)
	out := Recorded{State: RecordCurrent, Record: r}
	switch {
	case err != nil:
		return Recorded{State: RecordUnreadable, Err: err}
	case keyID == "":
		out.State = RecordUnknownKey
	case ann[plan.HashKeyAnnotation] != keyID:
		return Recorded{State: RecordOtherKey}
	}
	out.Version = plan.ParseVersion(ann[plan.VersionAnnotation], r)
	return out
}
