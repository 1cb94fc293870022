package sealed_test

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/sealed"
)

const ciphertext = "AgBy3i4OJSWK+PiTySYZZA9rO43cGDEq"

func sealedSecret(enc map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec":   map[string]any{"encryptedData": enc, "template": map[string]any{"type": "Opaque"}},
		"status": map[string]any{"observedGeneration": int64(1)},
	}}
	u.SetGroupVersionKind(sealed.GVK)
	u.SetNamespace("shop")
	u.SetName("db")
	u.SetUID("u1")
	u.SetResourceVersion("7")
	u.SetAnnotations(map[string]string{"sealedsecrets.bitnami.com/cluster-wide": "true"})
	u.SetLabels(map[string]string{"app": "shop"})
	return u
}

// TestTransform: what is kept of a SealedSecret is its name and a hash per
// key, never its ciphertext; a key sealed again gets another hash, the
// others keep theirs; the transform is idempotent.
func TestTransform(t *testing.T) {
	h := hash.NewHasher([]byte("k"))
	tr := sealed.Transform(h)
	out, err := tr(sealedSecret(map[string]any{"password": ciphertext, "user": "AgAAAA", "bad,key": "AgBB"}))
	if err != nil {
		t.Fatal(err)
	}
	m, ok := out.(*metav1.PartialObjectMetadata)
	if !ok {
		t.Fatalf("transform returned %T", out)
	}
	b, _ := json.Marshal(m)
	for _, leak := range []string{ciphertext, "AgAAAA", "Opaque", "observedGeneration", "cluster-wide", "app"} {
		if strings.Contains(string(b), leak) {
			t.Errorf("kept %q: %s", leak, b)
		}
	}
	if m.Name != "db" || m.Namespace != "shop" || m.UID != "u1" || m.ResourceVersion != "7" || m.Kind != "SealedSecret" {
		t.Errorf("metadata not kept: %s", b)
	}
	d, err := hash.FromObject(m)
	if err != nil {
		t.Fatal(err)
	}
	if keys := slices.Sorted(maps.Keys(d.Keys)); !slices.Equal(keys, []string{"password", "user"}) {
		t.Errorf("keys %v, want password and user (a key no Secret may hold is left out)", keys)
	}
	resealed, _ := tr(sealedSecret(map[string]any{"password": ciphertext + "x", "user": "AgAAAA"}))
	d2, _ := hash.FromObject(resealed.(*metav1.PartialObjectMetadata))
	if got := hash.ChangedKeys(d.Keys, d2.Keys); !slices.Equal(got, []string{"password"}) {
		t.Errorf("changed keys %v, want [password]", got)
	}
	if again, _ := tr(m); again != m {
		t.Errorf("a transformed object was transformed again")
	}
}

func TestChange(t *testing.T) {
	for _, tt := range []struct {
		name      string
		old, new  map[string]string
		wantEvent string
		wantKeys  []string
	}{
		{"created", nil, map[string]string{"b": "1", "a": "2"}, sealed.Created, []string{"a", "b"}},
		{"created empty", nil, map[string]string{}, sealed.Created, []string{}},
		{"deleted", map[string]string{"a": "1"}, nil, sealed.Deleted, []string{"a"}},
		{"a key sealed again", map[string]string{"a": "1", "b": "2"}, map[string]string{"a": "1", "b": "3"}, sealed.Updated, []string{"b"}},
		{"added and removed", map[string]string{"a": "1"}, map[string]string{"b": "1"}, sealed.Updated, []string{"a", "b"}},
		{"status or metadata only", map[string]string{"a": "1"}, map[string]string{"a": "1"}, "", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			event, keys := sealed.Change(tt.old, tt.new)
			if event != tt.wantEvent || !cmp.Equal(keys, tt.wantKeys) {
				t.Errorf("Change() = %q %v, want %q %v", event, keys, tt.wantEvent, tt.wantKeys)
			}
		})
	}
}

// TestKeepOwner: the Secret kept by the store names the SealedSecret it
// was made from, and nothing of another owner.
func TestKeepOwner(t *testing.T) {
	tr := sealed.KeepOwner(hash.NewHasher([]byte("k")).Transform())
	for _, tt := range []struct {
		name   string
		owners []metav1.OwnerReference
		want   string
	}{
		{"made from a SealedSecret", []metav1.OwnerReference{
			{APIVersion: "apps/v1", Kind: "Deployment", Name: "other"},
			{APIVersion: "bitnami.com/v1alpha1", Kind: "SealedSecret", Name: "db", UID: "u1"},
		}, "db"},
		{"another owner", []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "SealedSecret", Name: "x"}}, ""},
		{"no owner", nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db", OwnerReferences: tt.owners}, Data: map[string][]byte{"password": []byte("hunter2")}}
			out, err := tr(s)
			if err != nil {
				t.Fatal(err)
			}
			m := out.(*metav1.PartialObjectMetadata)
			if got := sealed.Owner(m); got != tt.want {
				t.Errorf("Owner() = %q, want %q", got, tt.want)
			}
			if len(m.OwnerReferences) > 1 {
				t.Errorf("kept other owners: %v", m.OwnerReferences)
			}
		})
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", OwnerReferences: []metav1.OwnerReference{{APIVersion: "bitnami.com/v1alpha1", Kind: "SealedSecret", Name: "x"}}}}
	out, _ := tr(cm)
	if len(out.(*metav1.PartialObjectMetadata).OwnerReferences) != 0 {
		t.Errorf("a ConfigMap keeps owner references")
	}
}
