package hash_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watcher-dev/watcher/internal/hash"
)

// FuzzFromObject: whatever the digest annotations of a cached object hold,
// FromObject answers without panicking, and a digest Transform made reads
// back exactly.
func FuzzFromObject(f *testing.F) {
	for _, s := range []string{"", "a=1", "a=1,b=2", "a", "=", ",", "a=1,,b=2", "a==1"} {
		f.Add(s, "sum")
	}
	f.Fuzz(func(t *testing.T, keys, sum string) {
		obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
			hash.KeysAnnotation: keys, hash.SumAnnotation: sum,
		}}}
		d, err := hash.FromObject(obj)
		if err == nil && d.Sum != sum {
			t.Fatalf("Sum %q, want %q", d.Sum, sum)
		}
	})
}
