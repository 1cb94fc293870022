package evict

import (
	"bytes"
	"crypto/hmac"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldManager is the field manager of the writes that restart a workload
// by eviction: the API server stamps its managedFields entry with its own
// clock at each of them, and with no other write (watcher's other writes
// are its default manager's). That stamp, not watcher's clock, tells the
// pods to replace (ServerTime).
const FieldManager = "watcher-evict"

// ServerTime returns when the API server wrote the last restart by
// eviction of obj, a workload read from the API server (with its
// managedFields), to the second: the time of FieldManager's entry, if it
// owns the restart's state annotation (stateKey; else the last restart was
// not by eviction, or was written before this field manager existed).
//
// Pods' creation times are the API server's too, so comparing them with
// this time is right whatever watcher's clock says: a clock ahead would
// take replacements for old pods and evict them again, a clock behind
// would take old pods for replacements and leave them.
func ServerTime(obj client.Object, stateKey string) (time.Time, bool) {
	owned := []byte(`"f:` + stateKey + `"`)
	for _, f := range obj.GetManagedFields() {
		if f.Manager != FieldManager || f.Operation != metav1.ManagedFieldsOperationUpdate || f.Subresource != "" ||
			f.Time == nil || f.FieldsV1 == nil || !bytes.Contains(f.FieldsV1.GetRawBytes(), owned) {
			continue
		}
		return f.Time.Time, true
	}
	return time.Time{}, false
}

// DoneAnnotation, on a workload restarted by eviction, says that the
// restart of the time it holds is done: every pod created before it was
// replaced, and as many pods as the workload wants are Ready. The
// controller writes it once, when it first sees the restart done, so that
// watcher after a restart, or a new leader, knows from its cache alone,
// with no request, that a restart past its timeout is done and not
// failed. Its value is the restart's time (Unix seconds, as
// guard.State.At) and a MAC bound to the workload's UID and the
// installation's key: a copy on another workload, or an edit, says
// nothing.
const DoneAnnotation = "watcher.dev/evicted"

// Signer computes a MAC with the installation's key (hash.Hasher.MAC).
type Signer func(data []byte) string

// DoneMark returns the value of DoneAnnotation for the restart at of the
// workload of uid.
func DoneMark(at time.Time, uid string, sign Signer) string {
	s := strconv.FormatInt(at.Unix(), 10)
	return s + "." + sign(donePayload(s, uid))
}

// IsDone reports whether annotations say that the restart at of the
// workload of uid is done (a DoneAnnotation watcher wrote for it).
func IsDone(annotations map[string]string, at time.Time, uid string, sign Signer) bool {
	v, ok := annotations[DoneAnnotation]
	if !ok || sign == nil || len(v) > 256 {
		return false
	}
	s, mac, ok := strings.Cut(v, ".")
	return ok && s == strconv.FormatInt(at.Unix(), 10) && hmac.Equal([]byte(mac), []byte(sign(donePayload(s, uid))))
}

func donePayload(at, uid string) []byte {
	return []byte("watcher evicted v1\x00" + uid + "\x00" + at)
}
