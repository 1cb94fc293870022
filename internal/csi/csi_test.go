package csi

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/object"
)

// status returns a SecretProviderClassPodStatus as the driver writes it.
func status(pod, class string, objects ...[2]string) *unstructured.Unstructured {
	var objs []any
	for _, o := range objects {
		objs = append(objs, map[string]any{"id": o[0], "version": o[1]})
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{
		"podName": pod, "secretProviderClassName": class, "mounted": true, "objects": objs,
		"targetPath": "/var/lib/kubelet/pods/uid/volumes/kubernetes.io~csi/secrets/mount",
	}}}
	u.SetGroupVersionKind(GVK)
	u.SetNamespace("shop")
	u.SetName(pod + "-shop-" + class)
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod, UID: "uid-" + "pod"}})
	return u
}

func TestFromUnstructured(t *testing.T) {
	s := FromUnstructured(status("web-1", "db", [2]string{"secret/pw", "v1"}, [2]string{"secret/user", "v3"}), testHasher)
	if s.Pod != "web-1" || s.Class != "db" || !s.Mounted || len(s.Objects) != 2 || s.PodUID() != "uid-pod" {
		t.Fatalf("got %+v", s)
	}
	if s.Objects["secret/pw"] != vh("secret/pw", "v1") {
		t.Errorf("object hash %q", s.Objects["secret/pw"])
	}
	for _, v := range s.Objects {
		if v == "v1" || v == "v3" {
			t.Errorf("a version kept as is: %q", v)
		}
	}
	if s.Digest != Digest("db", s.Objects) {
		t.Errorf("digest %q", s.Digest)
	}
	empty := FromUnstructured(&unstructured.Unstructured{Object: map[string]any{"status": "not a map"}}, testHasher)
	if len(empty.Objects) != 0 || empty.Class != "" {
		t.Errorf("malformed status read as %+v", empty)
	}
}

// TestDigest: the digest is the class and every object's id and version;
// the order of the objects does not count.
func TestDigest(t *testing.T) {
	pw1, pw2, user1 := vh("pw", "1"), vh("pw", "2"), vh("user", "1")
	base := Digest("db", map[string]string{"pw": pw1, "user": user1})
	tests := []struct {
		name    string
		class   string
		objects map[string]string
		same    bool
	}{
		{"same", "db", map[string]string{"user": user1, "pw": pw1}, true},
		{"another version", "db", map[string]string{"pw": pw2, "user": user1}, false},
		{"another class", "cache", map[string]string{"pw": pw1, "user": user1}, false},
		{"an object less", "db", map[string]string{"pw": pw1}, false},
		{"an object more", "db", map[string]string{"pw": pw1, "user": user1, "key": vh("key", "1")}, false},
		{"ids swapped", "db", map[string]string{"pw": user1, "user": pw1}, false},
	}
	for _, tt := range tests {
		if got := Digest(tt.class, tt.objects) == base; got != tt.same {
			t.Errorf("%s: same digest %t, want %t", tt.name, got, tt.same)
		}
	}
	if vh("a", "1") == vh("b", "1") {
		t.Error("equal versions of two objects hash alike")
	}
}

// TestPick: the current versions of a class of a workload.
func TestPick(t *testing.T) {
	s := func(digest string, seq uint64) seen { return seen{digest: digest, seq: seq, created: 100} }
	at := func(digest string, created int64) seen { return seen{digest: digest, created: created} }
	tests := []struct {
		name     string
		statuses []seen
		want     string
	}{
		{"none", nil, ""},
		{"one listed", []seen{s("a", 0)}, "a"},
		{"most listed", []seen{s("b", 0), s("a", 0), s("b", 0)}, "b"},
		{"tie: smallest", []seen{s("b", 0), s("a", 0)}, "a"},
		{"a live one wins over listed ones", []seen{s("a", 0), s("a", 0), s("b", 3)}, "b"},
		{"the latest live one", []seen{s("c", 4), s("b", 9), s("a", 0)}, "b"},
		{"listed: the latest mount wins over old pods", []seen{at("old", 100), at("old", 100), at("new", 160)}, "new"},
		{"listed: most of the latest mounts", []seen{at("x", 100), at("b", 160), at("a", 160), at("b", 160)}, "b"},
	}
	for _, tt := range tests {
		got, ok := pick(tt.statuses)
		if got.digest != tt.want || ok != (tt.want != "") {
			t.Errorf("%s: %q %t, want %q", tt.name, got.digest, ok, tt.want)
		}
	}
}

// TestTrackerOneRotation: three pods' statuses rotated to the same
// versions are one rotation, handed over once; a status listed at
// start-up, or a metadata-only write, is none.
func TestTrackerOneRotation(t *testing.T) {
	web := object.Ref{Kind: "Deployment", Namespace: "shop", Name: "web"}
	tr := newTracker()
	v1 := [2]string{"secret/pw", "v1"}
	v2 := [2]string{"secret/pw", "v2"}
	var handed []Rotation
	observe := func(pod string, live bool, o [2]string) {
		key := "shop/" + pod
		if tr.observe(key, FromUnstructured(status(pod, "db", o), testHasher), live) || !tr.filed(key) {
			if r, ok := tr.file(key, web); ok {
				handed = append(handed, r)
			}
		}
	}
	for _, pod := range []string{"a", "b", "c"} {
		observe(pod, false, v1)
	}
	if len(handed) != 1 || handed[0].Class != "db" || handed[0].Workload != web {
		t.Fatalf("start-up: handed %+v, want the adoption only", handed)
	}
	observe("b", true, v1) // metadata only
	for _, pod := range []string{"a", "b", "c"} {
		observe(pod, true, v2)
	}
	if len(handed) != 2 || handed[1].Digest == handed[0].Digest {
		t.Fatalf("rotation: handed %+v, want one more", handed)
	}
	if got := tr.mounted(web)["db"]["secret/pw"]; got != vh("secret/pw", "v2") {
		t.Errorf("mounted %q", got)
	}
	// The rotated pod restarts first: its status goes, the latest
	// versions stay current though older pods still say v1.
	tr2 := newTracker()
	tr, handed = tr2, nil
	for _, pod := range []string{"a", "b", "c"} {
		observe(pod, false, v1)
	}
	observe("a", true, v2)
	tr.forget("shop/a")
	if got := tr.mounted(web)["db"]["secret/pw"]; got != vh("secret/pw", "v2") {
		t.Errorf("after the rotated pod went: mounted %q, want v2's", got)
	}
	tr.forget("shop/b")
	tr.forget("shop/c")
	if got := tr.mounted(web); got != nil {
		t.Errorf("no status left: mounted %v", got)
	}
}

// testHasher is the installation's hash key of these tests.
var testHasher = hash.NewHasher([]byte("csi-test-installation-key"))

// vh is the VersionHash of object id at version in class db of namespace
// shop.
func vh(id, version string) string { return VersionHash(testHasher, "shop", "db", id, version) }

// TestVersionHashKeyed: a version's hash is keyed with the installation's
// key and bound to its namespace, class and object, as every hash watcher
// records: without the key, a guessed version cannot be tested against
// it, and equal versions elsewhere hash apart; with the same key, the same
// version of the same object always hashes alike.
func TestVersionHashKeyed(t *testing.T) {
	base := VersionHash(testHasher, "shop", "db", "secret/pw", "v1")
	other := hash.NewHasher([]byte("another-installation-key"))
	for _, tt := range []struct {
		name string
		got  string
		same bool
	}{
		{"same key, object and version", VersionHash(testHasher, "shop", "db", "secret/pw", "v1"), true},
		{"another installation key", VersionHash(other, "shop", "db", "secret/pw", "v1"), false},
		{"another namespace", VersionHash(testHasher, "bank", "db", "secret/pw", "v1"), false},
		{"another class", VersionHash(testHasher, "shop", "cache", "secret/pw", "v1"), false},
		{"another object", VersionHash(testHasher, "shop", "db", "secret/user", "v1"), false},
		{"another version", VersionHash(testHasher, "shop", "db", "secret/pw", "v2"), false},
		{"the unkeyed hash of the id and version", func() string {
			sum := sha256.Sum256([]byte("secret/pw\x00v1"))
			return hex.EncodeToString(sum[:8])
		}(), false},
	} {
		if (tt.got == base) != tt.same {
			t.Errorf("%s: same hash %t, want %t", tt.name, tt.got == base, tt.same)
		}
	}
	if len(base) != hash.KeyHashLen {
		t.Errorf("hash %q: want %d hex digits, as a key hash", base, hash.KeyHashLen)
	}
	s := FromUnstructured(status("web-1", "db", [2]string{"secret/pw", "v1"}), other)
	if s.Objects["secret/pw"] != VersionHash(other, "shop", "db", "secret/pw", "v1") {
		t.Errorf("the status's hash %q is not the Hasher's", s.Objects["secret/pw"])
	}
}
