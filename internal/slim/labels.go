package slim

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/watcher-dev/watcher/internal/packed"
)

// LabelsAnnotation holds, on a stored object, its labels as one string
// (EncodeLabels): a map per object would cost several times more memory
// (measured with the benchmark's 10,000 workloads and Secrets). Like the
// other cached annotations, its key is not a valid annotation key, so no
// object from the API server can carry it.
const LabelsAnnotation = "watcher.dev/cached/labels"

// EncodeLabels returns "key=value,key=value", sorted by key, each key
// written as its number in labelKeys when it has one: the same few keys
// (app.kubernetes.io/name, helm.sh/chart...) are on most objects, and
// three bytes are less than their text. Label keys and values cannot hold
// "=" or ","; a label that does (never one from the API server), or whose
// key begins with keyMark, is left out.
func EncodeLabels(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if !strings.ContainsAny(k, "=,") && !strings.ContainsAny(v, ",") && !strings.HasPrefix(k, keyMark) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	codes := make([]string, len(keys))
	n := max(len(keys)-1, 0) // the commas
	for i, k := range keys {
		codes[i] = labelKeys.code(k)
		n += len(codes[i]) + 1 + len(m[k])
	}
	// The string is kept as built: room for exactly its bytes.
	var b strings.Builder
	b.Grow(n)
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(codes[i])
		b.WriteByte('=')
		b.WriteString(m[k])
	}
	return b.String()
}

// Labels returns the labels of obj: read from LabelsAnnotation on a stored
// object, from its metadata on any other.
func Labels(obj metav1.Object) labels.Labels {
	if s, ok := packed.Annotation(obj, LabelsAnnotation); ok {
		return encoded(s)
	}
	return labels.Set(obj.GetLabels())
}

// encoded is labels as EncodeLabels writes them; it implements
// labels.Labels without building a map.
type encoded string

// Has implements labels.Labels.
func (e encoded) Has(label string) bool {
	_, ok := e.Lookup(label)
	return ok
}

// Get implements labels.Labels.
func (e encoded) Get(label string) string {
	v, _ := e.Lookup(label)
	return v
}

// Lookup implements labels.Labels.
func (e encoded) Lookup(label string) (string, bool) {
	for rest := string(e); rest != ""; {
		var kv string
		kv, rest, _ = strings.Cut(rest, ",")
		if k, v, ok := strings.Cut(kv, "="); ok && labelKeys.key(k) == label {
			return v, true
		}
	}
	return "", false
}
