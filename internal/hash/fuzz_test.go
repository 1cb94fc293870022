package hash_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watcher-dev/watcher/internal/hash"
)

// FuzzFromObject: whatever the digest annotations of a cached object hold,
// FromObject answers without panicking, and a digest Transform made reads
// back exactly.
func FuzzFromObject(f *testing.F) {
	raw := "\x00=,\xffhash" // a raw key hash may hold "=" and ","
	for _, s := range []string{"", "a=1", "a=1,b=2", "a", "=", ",", "a=1,,b=2", "a==1", "a=" + raw, "a=" + raw + ",b=" + raw} {
		f.Add(s, "sum")
		f.Add(s, "0123456789abcdef0123456789abcdef")
	}
	f.Fuzz(func(t *testing.T, keys, sum string) {
		obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
			hash.KeysAnnotation: keys, hash.SumAnnotation: sum,
		}}}
		d, err := hash.FromObject(obj)
		if err == nil && hash.EncodeSum(d.Sum) != sum {
			t.Fatalf("Sum %q, want the hex of %q", d.Sum, sum)
		}
		for k, v := range d.Keys {
			if len(v) != hash.KeyHashLen || !strings.Contains(keys, k+"=") {
				t.Fatalf("keys %q read as %v", keys, d.Keys)
			}
		}
	})
}
