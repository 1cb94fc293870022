package hash_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/watcher-dev/watcher/internal/attribution"
	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/slim"
)

const (
	lastApplied = "kubectl.kubernetes.io/last-applied-configuration"
	password    = "hunter2-Pa55w0rd-do-not-leak"
)

func meta(annotations map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: "app", Namespace: "ns", UID: "u-1", ResourceVersion: "42",
		Labels:        map[string]string{"app": "web"},
		Annotations:   annotations,
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}},
	}
}

// want is what Transform must make of an object with meta(...): trimmed
// metadata with the kept annotation and the digest.
func want(kind string, keep map[string]string, d hash.Digest) *metav1.PartialObjectMetadata {
	a := map[string]string{hash.SumAnnotation: hash.EncodeSum(d.Sum), hash.KeysAnnotation: hash.EncodeKeys(d.Keys)}
	a[slim.LabelsAnnotation] = slim.EncodeLabels(map[string]string{"app": "web"})
	for k, v := range keep {
		a[k] = v
	}
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "ns", UID: "u-1", ResourceVersion: "42", Annotations: a},
	}
}

func TestTransform(t *testing.T) {
	transform := hasher.Transform("require-restart")
	tests := []struct {
		name string
		in   any
		want *metav1.PartialObjectMetadata
	}{{
		name: "configmap data and binaryData",
		in: &corev1.ConfigMap{
			ObjectMeta: meta(map[string]string{lastApplied: `{"data":{"a":"1"}}`, "team": "x", "require-restart": "false"}),
			Data:       map[string]string{"a": "1", "b": "2"},
			BinaryData: map[string][]byte{"c": {0, 1}},
		},
		want: want("ConfigMap", map[string]string{"require-restart": "false"},
			hasher.Of(at("ConfigMap"), map[string][]byte{"a": []byte("1"), "b": []byte("2"), "c": {0, 1}})),
	}, {
		name: "empty configmap",
		in:   &corev1.ConfigMap{ObjectMeta: meta(nil)},
		want: want("ConfigMap", nil, hasher.Of(at("ConfigMap"), nil)),
	}, {
		name: "secret",
		in: &corev1.Secret{
			ObjectMeta: meta(map[string]string{lastApplied: `{"stringData":{"pass":"` + password + `"}}`}),
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{"user": []byte("admin"), "pass": []byte(password)},
		},
		want: want("Secret", nil, hasher.Of(at("Secret"), map[string][]byte{"user": []byte("admin"), "pass": []byte(password)})),
	}, {
		name: "the writers of data are kept, the rest of managedFields dropped",
		in: &corev1.Secret{
			ObjectMeta: withFields(meta(nil),
				metav1.ManagedFieldsEntry{Manager: "vault-injector", Time: &written, FieldsV1: metav1.NewFieldsV1(`{"f:data":{"f:pass":{}}}`)},
				metav1.ManagedFieldsEntry{Manager: "labeler", Time: &written, FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{}}}`)}),
			Data: map[string][]byte{"pass": []byte(password)},
		},
		want: withWriters(want("Secret", nil, hasher.Of(at("Secret"), map[string][]byte{"pass": []byte(password)})), "1700000000 vault-injector"),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := transform(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Transform() mismatch (-want +got):\n%s", diff)
			}
			again, err := transform(got)
			if err != nil || !cmp.Equal(got, again) {
				t.Errorf("Transform is not idempotent (%v):\n%s", err, cmp.Diff(got, again))
			}
			d, err := hash.FromObject(got.(*metav1.PartialObjectMetadata))
			if err != nil {
				t.Fatal(err)
			}
			if hash.EncodeSum(d.Sum) != tt.want.Annotations[hash.SumAnnotation] || hash.EncodeKeys(d.Keys) != tt.want.Annotations[hash.KeysAnnotation] {
				t.Errorf("FromObject() = %+v", d)
			}
		})
	}
}

// TestTransformLeaksNothing: nothing of a Secret's value survives, raw or
// base64, not even through the last-applied copy kubectl keeps.
func TestTransformLeaksNothing(t *testing.T) {
	s := &corev1.Secret{
		ObjectMeta: meta(map[string]string{lastApplied: `{"stringData":{"pass":"` + password + `"}}`}),
		Data:       map[string][]byte{"pass": []byte(password)},
	}
	got, err := hasher.Transform()(s)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(got)
	for _, leak := range []string{password, base64.StdEncoding.EncodeToString([]byte(password))} {
		if strings.Contains(string(b), leak) {
			t.Errorf("transformed object holds %q: %s", leak, b)
		}
	}
}

// TestDataAndBinaryDataAgree: the same bytes under data or binaryData are
// the same content; the same bytes in a Secret of the same name are not (the
// kind takes part in the hash).
func TestDataAndBinaryDataAgree(t *testing.T) {
	a, _ := hasher.OfObject(&corev1.ConfigMap{Data: map[string]string{"k": "v", "l": "w"}})
	b, _ := hasher.OfObject(&corev1.ConfigMap{BinaryData: map[string][]byte{"k": []byte("v"), "l": []byte("w")}})
	c, _ := hasher.OfObject(&corev1.ConfigMap{Data: map[string]string{"k": "v"}, BinaryData: map[string][]byte{"l": []byte("w")}})
	s, _ := hasher.OfObject(&corev1.Secret{Data: map[string][]byte{"k": []byte("v"), "l": []byte("w")}})
	if a.Sum != b.Sum || a.Sum != c.Sum {
		t.Errorf("sums differ: %s %s %s", a.Sum, b.Sum, c.Sum)
	}
	if a.Sum == s.Sum || a.Keys["k"] == s.Keys["k"] {
		t.Errorf("a ConfigMap and a Secret with the same content have the same hashes: %s", a.Sum)
	}
	if _, err := hasher.OfObject(&corev1.Pod{}); err == nil {
		t.Error("OfObject(Pod): no error")
	}
}

func TestFromObjectErrors(t *testing.T) {
	for name, a := range map[string]map[string]string{
		"no annotations": nil,
		"sum only":       {hash.SumAnnotation: "abc"},
		"keys only":      {hash.KeysAnnotation: "a=1"},
		"bad entry":      {hash.SumAnnotation: "abc", hash.KeysAnnotation: "a"},
		"hex sum":        {hash.SumAnnotation: strings.Repeat("ab", 32), hash.KeysAnnotation: ""},
		"short hash":     {hash.SumAnnotation: strings.Repeat("s", 32), hash.KeysAnnotation: "a=1234567"},
		"no separator":   {hash.SumAnnotation: strings.Repeat("s", 32), hash.KeysAnnotation: "a=12345678b=12345678"},
	} {
		if _, err := hash.FromObject(&metav1.ObjectMeta{Annotations: a}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestStoredDigest: the cache keeps a digest's hashes as raw bytes, half
// their hex text, and FromObject gives back the Digest the content has,
// whatever bytes ("=", ",") the raw hashes hold.
func TestStoredDigest(t *testing.T) {
	for _, data := range []map[string][]byte{
		nil,
		{"password": []byte("hunter2")},
		{"a": []byte("1"), "b.txt": []byte("2"), "c-d_e": []byte("3"), "tls.key": []byte("4")},
	} {
		sec := &corev1.Secret{ObjectMeta: meta(nil), Data: data}
		want, _ := hasher.OfObject(sec)
		out, err := hasher.Transform()(sec)
		if err != nil {
			t.Fatal(err)
		}
		m := out.(*metav1.PartialObjectMetadata)
		if n := len(m.Annotations[hash.SumAnnotation]); n != 32 {
			t.Errorf("%v: stored sum of %d bytes, want 32", data, n)
		}
		n := len(m.Annotations[hash.KeysAnnotation])
		wantLen := 0
		for k := range data {
			wantLen += len(k) + 1 + hash.KeyHashLen/2 + 1
		}
		if wantLen > 0 {
			wantLen-- // no "," after the last
		}
		if n != wantLen {
			t.Errorf("%v: stored key hashes of %d bytes, want %d", data, n, wantLen)
		}
		got, err := hash.FromObject(m)
		if err != nil || !cmp.Equal(got, want) {
			t.Errorf("%v: FromObject = %+v, %v; want %+v", data, got, err, want)
		}
		for _, v := range m.Annotations {
			for _, secret := range data {
				if strings.Contains(v, string(secret)) && len(secret) > 1 {
					t.Errorf("a stored annotation holds the value %q", secret)
				}
			}
		}
	}
}

func TestTransformOtherTypesUnchanged(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: meta(nil)}
	for _, in := range []any{pod, "text", nil} {
		got, err := hasher.Transform()(in)
		if err != nil || !cmp.Equal(in, got) {
			t.Errorf("Transform(%T) = %v, %v", in, got, err)
		}
	}
}

// TestDigestAnnotationsAreInvalid: the API server would refuse an object
// carrying the digest annotations, so none can come from it.
func TestDigestAnnotationsAreInvalid(t *testing.T) {
	for _, key := range []string{hash.SumAnnotation, hash.KeysAnnotation} {
		errs := apivalidation.ValidateAnnotations(map[string]string{key: "x"}, field.NewPath("metadata", "annotations"))
		if len(errs) == 0 {
			t.Errorf("%s is a valid annotation key", key)
		}
	}
}

var written = metav1.Unix(1700000000, 0)

func withFields(m metav1.ObjectMeta, e ...metav1.ManagedFieldsEntry) metav1.ObjectMeta {
	m.ManagedFields = append(m.ManagedFields, e...)
	return m
}

func withWriters(p *metav1.PartialObjectMetadata, writers string) *metav1.PartialObjectMetadata {
	p.Annotations[attribution.Annotation] = writers
	return p
}

// at names the object meta returns, of the given kind.
func at(kind string) hash.Source { return hash.Source{Kind: kind, Namespace: "ns", Name: "app"} }
