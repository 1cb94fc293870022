package hash_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watcher-dev/watcher/internal/hash"
)

// TestNamespaceKeys: the key of a namespace is stable (the same from any
// Hasher of the installation's key), differs per namespace and per
// installation key, and computes exactly the hashes the controller records
// in its namespace, and none of another.
func TestNamespaceKeys(t *testing.T) {
	data := map[string]string{"password": "admin"}
	shop := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db"}, Data: bytesOf(data)}
	tenant := shop.DeepCopy()
	tenant.Namespace = "tenant"

	a, again := hasher.NamespaceKey("shop"), hash.NewHasher(testKey).NamespaceKey("shop")
	if a.Encode() != again.Encode() {
		t.Error("the key of a namespace is not stable")
	}
	if a.Namespace() != "shop" || a.ID() != hasher.ID() {
		t.Errorf("key of shop: namespace %s, ID %s; want shop, %s", a.Namespace(), a.ID(), hasher.ID())
	}
	keyOf := func(k hash.NamespaceKey) string { return strings.Split(k.Encode(), ":")[2] }
	seen := map[string]string{}
	for _, k := range []hash.NamespaceKey{
		a, hasher.NamespaceKey("tenant"), hasher.NamespaceKey("sho"), hasher.NamespaceKey(""),
		hash.NewHasher([]byte("another key, as long as it needs")).NamespaceKey("shop"),
	} {
		if other, ok := seen[keyOf(k)]; ok {
			t.Errorf("%s and %s share their key", k, other)
		}
		seen[keyOf(k)] = k.String()
	}

	want, _ := hasher.OfObject(shop)
	got, err := a.OfObject(shop)
	if err != nil || !cmp.Equal(got, want) {
		t.Errorf("key of shop: OfObject = %+v, %v; want the controller's %+v", got, err, want)
	}
	if d, err := a.OfObject(tenant); err == nil {
		t.Errorf("key of shop hashed a Secret of namespace tenant: %+v", d)
	}
	theirs, _ := hasher.OfObject(tenant)
	if theirs.Keys["password"] == want.Keys["password"] {
		t.Error("the same value in two namespaces has the same hash")
	}
}

// TestNamespaceKeyEncodings: what watcher key derive prints and writes
// reads back; anything else is refused without quoting it; String never
// shows the key.
func TestNamespaceKeyEncodings(t *testing.T) {
	k := hasher.NamespaceKey("shop")
	back, err := hash.ParseNamespaceKey(k.Encode() + "\n")
	if err != nil || back.Encode() != k.Encode() {
		t.Errorf("ParseNamespaceKey(Encode()) = %v, %v", back, err)
	}
	s := k.Secret("watcher-explain-key")
	if s.Namespace != "shop" || s.Name != "watcher-explain-key" {
		t.Errorf("Secret: %s/%s", s.Namespace, s.Name)
	}
	fromSecret, err := hash.NamespaceKeyOf(s)
	if err != nil || fromSecret.Encode() != k.Encode() {
		t.Errorf("NamespaceKeyOf(Secret()) = %v, %v", fromSecret, err)
	}
	key := strings.Split(k.Encode(), ":")[2]
	if strings.Contains(k.String(), key) || bytes.Contains([]byte(k.String()), s.Data["key"]) {
		t.Errorf("String() shows the key: %s", k)
	}

	id := hasher.ID()
	for _, bad := range []string{
		"", "shop", "shop:" + id, "shop:" + id + ":" + key + ":x",
		"Shop:" + id + ":" + key,      // not a namespace name
		"shop:" + id[:15] + ":" + key, // not an ID
		"shop:" + strings.ToUpper(id) + ":" + key,
		"shop:" + id + ":" + key[:20],        // too short
		"shop:" + id + ":" + key[:42] + "+/", // not base64url
	} {
		if _, err := hash.ParseNamespaceKey(bad); err == nil {
			t.Errorf("ParseNamespaceKey(%q): no error", bad)
		} else if len(bad) > 40 && strings.Contains(err.Error(), key[:20]) {
			t.Errorf("ParseNamespaceKey: the error quotes the key: %v", err)
		}
	}
	moved := s.DeepCopy()
	moved.Namespace = "tenant" // the key of shop copied to tenant
	if _, err := hash.NamespaceKeyOf(moved); err == nil {
		t.Error("NamespaceKeyOf: the key of shop read from a Secret of tenant")
	}
	empty := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "watcher-explain-key"}}
	if _, err := hash.NamespaceKeyOf(empty); err == nil {
		t.Error("NamespaceKeyOf(empty Secret): no error")
	}
}
