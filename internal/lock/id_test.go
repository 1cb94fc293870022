package lock_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watcher-dev/watcher/internal/lock"
)

// TestID: the names of changes are those the replicas of the previous
// version took locks under (in Redis, a lock of one version is seen by
// the other during a rolling upgrade).
func TestID(t *testing.T) {
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db", UID: "1234-abcd", ResourceVersion: "42"}}
	for _, tc := range []struct{ got, want string }{
		{lock.ID("Secret", obj), "Secret/shop/db/1234-abcd@42"},
		{lock.ID("SealedSecret", obj), "SealedSecret/shop/db/1234-abcd@42"},
		{lock.DeletedID("ConfigMap", "shop", "db", ""), "ConfigMap/shop/db@deleted"},
		{lock.DeletedID("SealedSecret", "shop", "db", "1234-abcd"), "SealedSecret/shop/db/1234-abcd@deleted"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
