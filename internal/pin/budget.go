package pin

import (
	"crypto/hmac"
	"regexp"
	"strconv"
)

// BytesSignature, on a snapshot beside Bytes, is the MAC of its size
// with the installation's key (SignBytes): the namespace's budget counts
// only the sizes watcher wrote, never what an object says of itself.
const BytesSignature = "watcher.dev/snapshot-bytes-mac"

// MaxBytes is the largest size a snapshot can claim: a ConfigMap or
// Secret holds at most 1 MiB, with keys; a larger claim is not watcher's.
const MaxBytes = 3 << 20

// SignBytes returns the MAC of the size n of the snapshot ns/name ("" when
// sign is nil).
func SignBytes(ns, name string, n int64, sign Signer) string {
	if sign == nil {
		return ""
	}
	return sign([]byte("watcher.dev/snapshot-bytes\x00" + ns + "\x00" + name + "\x00" + strconv.FormatInt(n, 10)))
}

// SignedBytes returns the size that the snapshot ns/name claims (its
// Bytes value, as written) when watcher wrote it: a decimal of at most
// MaxBytes whose MAC is mac. Without a signer (sign nil) any well-formed
// claim is taken. 0 otherwise.
func SignedBytes(ns, name, value, mac string, sign Signer) int64 {
	if len(value) > 8 {
		return 0
	}
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil || n <= 0 || n > MaxBytes || strconv.FormatInt(n, 10) != value {
		return 0
	}
	if sign != nil && !hmac.Equal([]byte(SignBytes(ns, name, n, sign)), []byte(mac)) {
		return 0
	}
	return n
}

// snapshotName is the shape of SnapshotName's names.
var snapshotName = regexp.MustCompile(`^[a-z0-9.-]*-pin-[0-9a-f]{20}$`)

// LooksLikeSnapshot reports whether name is shaped as SnapshotName names
// the snapshot of a source named source (any source when source is "").
func LooksLikeSnapshot(name, source string) bool {
	if !snapshotName.MatchString(name) {
		return false
	}
	return source == "" || name == SnapshotName(source, name[len(name)-SumLen:])
}
