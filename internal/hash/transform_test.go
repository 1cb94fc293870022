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
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/watcher-dev/watcher/internal/hash"
)

const (
	lastApplied = "kubectl.kubernetes.io/last-applied-configuration"
	password    = "hunter2-Pa55w0rd-do-not-leak"
)

func meta(annotations map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: "app", Namespace: "ns", ResourceVersion: "42",
		Labels:        map[string]string{"app": "web"},
		Annotations:   annotations,
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}},
	}
}

// wantMeta is meta after a transform: managed fields and last-applied gone,
// the Sum annotation added.
func wantMeta(sum string, annotations map[string]string) metav1.ObjectMeta {
	a := map[string]string{hash.SumAnnotation: sum}
	for k, v := range annotations {
		a[k] = v
	}
	return metav1.ObjectMeta{
		Name: "app", Namespace: "ns", ResourceVersion: "42",
		Labels: map[string]string{"app": "web"}, Annotations: a,
	}
}

func TestTransformConfigMap(t *testing.T) {
	immutable := true
	tests := []struct {
		name string
		in   *corev1.ConfigMap
		want *corev1.ConfigMap
	}{
		{
			name: "data and binaryData",
			in: &corev1.ConfigMap{
				ObjectMeta: meta(map[string]string{lastApplied: `{"data":{"a":"1"}}`, "team": "x"}),
				Data:       map[string]string{"a": "1", "b": "2"},
				BinaryData: map[string][]byte{"c": {0, 1}},
				Immutable:  &immutable,
			},
			want: &corev1.ConfigMap{
				ObjectMeta: wantMeta(wantSum("a", "1", "b", "2", "c", "\x00\x01"), map[string]string{"team": "x"}),
				Data:       map[string]string{"a": keyHash("1"), "b": keyHash("2"), "c": keyHash("\x00\x01")},
				Immutable:  &immutable,
			},
		},
		{
			name: "no annotations",
			in:   &corev1.ConfigMap{ObjectMeta: meta(nil), Data: map[string]string{"a": "1"}},
			want: &corev1.ConfigMap{ObjectMeta: wantMeta(wantSum("a", "1"), nil), Data: map[string]string{"a": keyHash("1")}},
		},
		{
			name: "no data",
			in:   &corev1.ConfigMap{ObjectMeta: meta(map[string]string{lastApplied: "{}"})},
			want: &corev1.ConfigMap{ObjectMeta: wantMeta(wantSum(), nil), Data: map[string]string{}},
		},
		{
			name: "already digested: unchanged",
			in: &corev1.ConfigMap{
				ObjectMeta: meta(map[string]string{hash.SumAnnotation: "s", lastApplied: "{}"}),
				Data:       map[string]string{"a": "1"},
			},
			want: &corev1.ConfigMap{
				ObjectMeta: meta(map[string]string{hash.SumAnnotation: "s", lastApplied: "{}"}),
				Data:       map[string]string{"a": "1"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := hasher.TransformConfigMap(tt.in)
			if err != nil {
				t.Fatalf("TransformConfigMap() error: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("TransformConfigMap() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTransformSecret(t *testing.T) {
	tests := []struct {
		name string
		in   *corev1.Secret
		want *corev1.Secret
	}{
		{
			name: "data and stringData",
			in: &corev1.Secret{
				ObjectMeta: meta(map[string]string{lastApplied: `{"stringData":{"p":"x"}}`, "team": "x"}),
				Type:       corev1.SecretTypeOpaque,
				Data:       map[string][]byte{"user": []byte("admin"), "pass": []byte(password)},
				StringData: map[string]string{"p": password},
			},
			want: &corev1.Secret{
				ObjectMeta: wantMeta(wantSum("pass", password, "user", "admin"), map[string]string{"team": "x"}),
				Type:       corev1.SecretTypeOpaque,
				Data:       map[string][]byte{"user": []byte(keyHash("admin")), "pass": []byte(keyHash(password))},
			},
		},
		{
			name: "no data",
			in:   &corev1.Secret{ObjectMeta: meta(nil), Type: corev1.SecretTypeTLS},
			want: &corev1.Secret{ObjectMeta: wantMeta(wantSum(), nil), Type: corev1.SecretTypeTLS, Data: map[string][]byte{}},
		},
		{
			name: "already digested: unchanged",
			in:   &corev1.Secret{ObjectMeta: meta(map[string]string{hash.SumAnnotation: "s"}), Data: map[string][]byte{"a": []byte("1")}},
			want: &corev1.Secret{ObjectMeta: meta(map[string]string{hash.SumAnnotation: "s"}), Data: map[string][]byte{"a": []byte("1")}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := hasher.TransformSecret(tt.in)
			if err != nil {
				t.Fatalf("TransformSecret() error: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("TransformSecret() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTransformIdempotent(t *testing.T) {
	cmObj := &corev1.ConfigMap{ObjectMeta: meta(map[string]string{lastApplied: "{}"}), Data: map[string]string{"a": "1"}, BinaryData: map[string][]byte{"b": {2}}}
	secObj := &corev1.Secret{ObjectMeta: meta(map[string]string{lastApplied: "{}"}), Data: map[string][]byte{"a": []byte(password)}}
	for _, tc := range []struct {
		name string
		fn   toolscache.TransformFunc
		obj  any
		copy func(any) any
	}{
		{"configmap", hasher.TransformConfigMap, cmObj, func(o any) any { return o.(*corev1.ConfigMap).DeepCopy() }},
		{"secret", hasher.TransformSecret, secObj, func(o any) any { return o.(*corev1.Secret).DeepCopy() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			once, err := tc.fn(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.copy(once)
			twice, err := tc.fn(once)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, twice); diff != "" {
				t.Errorf("second transform changed the object (-once +twice):\n%s", diff)
			}
		})
	}
}

// TestTransformSecretLeaksNothing checks that no form of the secret value
// survives anywhere in the cached object.
func TestTransformSecretLeaksNothing(t *testing.T) {
	applied, _ := json.Marshal(map[string]any{"stringData": map[string]string{"password": password}})
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: "db", Namespace: "ns",
			Annotations: map[string]string{lastApplied: string(applied)},
			ManagedFields: []metav1.ManagedFieldsEntry{{
				Manager:  "kubectl",
				FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{"f:password":{}},"f:stringData":{"f:x":"` + password + `"}}`)},
			}},
		},
		Data:       map[string][]byte{"password": []byte(password)},
		StringData: map[string]string{"password": password},
	}
	got, err := hasher.TransformSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	for _, form := range []string{password, base64.StdEncoding.EncodeToString([]byte(password))} {
		if strings.Contains(string(b), form) {
			t.Errorf("transformed secret contains %q: %s", form, b)
		}
	}
}

func TestTransformConfigMapDataAndBinaryDataAgree(t *testing.T) {
	text, _ := hasher.TransformConfigMap(&corev1.ConfigMap{Data: map[string]string{"k": "v", "l": "w"}})
	binary, _ := hasher.TransformConfigMap(&corev1.ConfigMap{BinaryData: map[string][]byte{"k": []byte("v"), "l": []byte("w")}})
	mixed, _ := hasher.TransformConfigMap(&corev1.ConfigMap{Data: map[string]string{"k": "v"}, BinaryData: map[string][]byte{"l": []byte("w")}})
	want, err := hash.FromObject(text)
	if err != nil {
		t.Fatal(err)
	}
	for name, obj := range map[string]any{"binaryData": binary, "mixed": mixed} {
		got, err := hash.FromObject(obj)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s digest differs from data digest (-data +%s):\n%s", name, name, diff)
		}
	}
}

func TestFromObjectRoundTrip(t *testing.T) {
	content := map[string]string{"a": "1", "b": "two", "c": ""}
	want := hasher.Of(bytesOf(content))
	cmObj, _ := hasher.TransformConfigMap(&corev1.ConfigMap{ObjectMeta: meta(nil), Data: content})
	secObj, _ := hasher.TransformSecret(&corev1.Secret{ObjectMeta: meta(nil), Data: bytesOf(content)})
	for name, obj := range map[string]any{"configmap": cmObj, "secret": secObj} {
		got, err := hash.FromObject(obj)
		if err != nil {
			t.Fatalf("%s: FromObject() error: %v", name, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: FromObject() mismatch (-want +got):\n%s", name, diff)
		}
	}
}

func TestFromObjectErrors(t *testing.T) {
	tests := []struct {
		name    string
		obj     any
		wantErr string
	}{
		{"untransformed configmap", &corev1.ConfigMap{ObjectMeta: meta(nil), Data: map[string]string{"a": "1"}}, "configmap ns/app has no digest"},
		{"untransformed secret", &corev1.Secret{ObjectMeta: meta(map[string]string{"x": "y"}), Data: map[string][]byte{"a": []byte(password)}}, "secret ns/app has no digest"},
		{"pod", &corev1.Pod{}, "*v1.Pod is not a ConfigMap or Secret"},
		{"configmap value, not pointer", corev1.ConfigMap{}, "v1.ConfigMap is not a ConfigMap or Secret"},
		{"nil", nil, "is not a ConfigMap or Secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := hash.FromObject(tt.obj)
			if err == nil {
				t.Fatalf("FromObject() = %+v, want an error", d)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("FromObject() error = %q, want it to contain %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), password) {
				t.Errorf("FromObject() error leaks the secret value: %q", err)
			}
			if !cmp.Equal(d, hash.Digest{}) {
				t.Errorf("FromObject() digest = %+v on error, want zero", d)
			}
		})
	}
}

func TestTransformOtherTypesUnchanged(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: meta(map[string]string{lastApplied: "{}"})}
	secret := &corev1.Secret{ObjectMeta: meta(map[string]string{lastApplied: "{}"}), Data: map[string][]byte{"a": []byte("1")}}
	configMap := &corev1.ConfigMap{ObjectMeta: meta(map[string]string{lastApplied: "{}"}), Data: map[string]string{"a": "1"}}
	tombstone := toolscache.DeletedFinalStateUnknown{Key: "ns/app", Obj: configMap.DeepCopy()}
	tests := []struct {
		name string
		fn   toolscache.TransformFunc
		obj  any
		want any
	}{
		{"pod to configmap transform", hasher.TransformConfigMap, pod, pod.DeepCopy()},
		{"pod to secret transform", hasher.TransformSecret, pod, pod.DeepCopy()},
		{"secret to configmap transform", hasher.TransformConfigMap, secret, secret.DeepCopy()},
		{"configmap to secret transform", hasher.TransformSecret, configMap, configMap.DeepCopy()},
		{"tombstone", hasher.TransformConfigMap, tombstone, toolscache.DeletedFinalStateUnknown{Key: "ns/app", Obj: configMap.DeepCopy()}},
		{"nil", hasher.TransformSecret, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.fn(tt.obj)
			if err != nil {
				t.Fatalf("transform error: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("transform changed a %T (-want +got):\n%s", tt.obj, diff)
			}
		})
	}
}

// TestSumAnnotationIsInvalid checks the premise the transforms rely on: the
// API server rejects SumAnnotation, so only a transform can have set it.
func TestSumAnnotationIsInvalid(t *testing.T) {
	errs := apivalidation.ValidateAnnotations(map[string]string{hash.SumAnnotation: "x"}, field.NewPath("metadata", "annotations"))
	if len(errs) == 0 {
		t.Errorf("annotation key %q is accepted by the API server's validation", hash.SumAnnotation)
	}
}
