package hash_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/watcher-dev/watcher/internal/hash"
)

var (
	sumRE     = regexp.MustCompile(`^[0-9a-f]{64}$`)
	keyHashRE = regexp.MustCompile(`^[0-9a-f]{16}$`)
)

// bytesOf turns a string map into the form Of takes.
func bytesOf(m map[string]string) map[string][]byte {
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		out[k] = []byte(v)
	}
	return out
}

// testKey keys the hasher every test uses.
var (
	testKey = []byte("0123456789abcdef-test-key")
	hasher  = hash.NewHasher(testKey)
)

// src is the object every test hashes, unless it says otherwise.
var src = hash.Source{Kind: "Secret", Namespace: "shop", Name: "db"}

// nsKey is the key of src's namespace, computed independently: the HMAC of
// "watcher/namespace/" and the namespace, keyed with the installation's key.
func nsKey() []byte {
	m := hmac.New(sha256.New, testKey)
	m.Write([]byte("watcher/namespace/" + src.Namespace))
	return m.Sum(nil)
}

// keyHash is the per-key hash Of must produce for key k of src, computed
// independently: the HMAC of the length-prefixed kind, namespace, name, key
// and value, keyed with the key of src's namespace.
func keyHash(k, v string) string {
	m := hmac.New(sha256.New, nsKey())
	m.Write(prefixed(src.Kind, src.Namespace, src.Name, k, v))
	return hex.EncodeToString(m.Sum(nil))[:hash.KeyHashLen]
}

// wantSum is the Sum Of must produce for src and the given key, value, key,
// value... sequence (already sorted by key).
func wantSum(fields ...string) string {
	m := hmac.New(sha256.New, nsKey())
	m.Write(prefixed(append([]string{src.Kind, src.Namespace, src.Name}, fields...)...))
	return hex.EncodeToString(m.Sum(nil))
}

// prefixed writes each field prefixed by its length as 8 big-endian bytes.
func prefixed(fields ...string) []byte {
	var buf []byte
	for _, f := range fields {
		buf = binary.BigEndian.AppendUint64(buf, uint64(len(f)))
		buf = append(buf, f...)
	}
	return buf
}

// TestKeyedHashes: another key gives other hashes and another ID, and the
// hashes are not the plain SHA-256 anyone could compute from a guess.
func TestKeyedHashes(t *testing.T) {
	other := hash.NewHasher([]byte("another key, as long as it needs"))
	data := bytesOf(map[string]string{"password": "admin"})
	a, b := hasher.Of(src, data), other.Of(src, data)
	if a.Sum == b.Sum || a.Keys["password"] == b.Keys["password"] {
		t.Errorf("two keys gave the same digest: %+v", a)
	}
	if hasher.ID() == other.ID() || hasher.ID() != hash.NewHasher(testKey).ID() {
		t.Errorf("IDs: %s, %s", hasher.ID(), other.ID())
	}
	plain := sha256.Sum256([]byte("admin"))
	if a.Keys["password"] == hex.EncodeToString(plain[:])[:hash.KeyHashLen] {
		t.Error("per-key hash is the unkeyed SHA-256 of the value")
	}
	if strings.Contains(hasher.ID(), hex.EncodeToString(testKey)[:8]) {
		t.Error("the ID shows the key")
	}
}

func TestOfKnownValues(t *testing.T) {
	tests := []struct {
		name string
		data map[string][]byte
		want hash.Digest
	}{
		{"nil", nil, hash.Digest{Sum: wantSum(), Keys: map[string]string{}}},
		{"empty", map[string][]byte{}, hash.Digest{Sum: wantSum(), Keys: map[string]string{}}},
		{"one key", bytesOf(map[string]string{"a": "1"}), hash.Digest{
			Sum: wantSum("a", "1"), Keys: map[string]string{"a": keyHash("a", "1")},
		}},
		{"keys sorted", bytesOf(map[string]string{"b": "2", "a": "1"}), hash.Digest{
			Sum: wantSum("a", "1", "b", "2"), Keys: map[string]string{"a": keyHash("a", "1"), "b": keyHash("b", "2")},
		}},
		{"nil and empty values", map[string][]byte{"a": nil, "b": {}}, hash.Digest{
			Sum: wantSum("a", "", "b", ""), Keys: map[string]string{"a": keyHash("a", ""), "b": keyHash("b", "")},
		}},
		{"binary value", map[string][]byte{"bin": {0, 0xff, '\n'}}, hash.Digest{
			Sum: wantSum("bin", "\x00\xff\n"), Keys: map[string]string{"bin": keyHash("bin", "\x00\xff\n")},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := hasher.Of(src, tt.data)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Of() mismatch (-want +got):\n%s", diff)
			}
			if !sumRE.MatchString(got.Sum) {
				t.Errorf("Sum %q is not 64 hex digits", got.Sum)
			}
			for k, h := range got.Keys {
				if !keyHashRE.MatchString(h) {
					t.Errorf("hash of key %q is %q, want %d hex digits", k, h, hash.KeyHashLen)
				}
			}
		})
	}
}

func TestOfStableUnderMapOrder(t *testing.T) {
	data := map[string]string{}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"} {
		data[k] = "value of " + k
	}
	want := hasher.Of(src, bytesOf(data))
	for i := 0; i < 50; i++ {
		// A fresh map each time: Go randomises iteration order.
		if got := hasher.Of(src, bytesOf(data)); !cmp.Equal(want, got) {
			t.Fatalf("Of() of the same content differs between calls:\n%s", cmp.Diff(want, got))
		}
	}
}

func TestOfSumChanges(t *testing.T) {
	base := map[string]string{"a": "1", "b": "2"}
	tests := []struct {
		name  string
		other map[string]string
	}{
		{"value changed", map[string]string{"a": "1", "b": "3"}},
		{"value emptied", map[string]string{"a": "1", "b": ""}},
		{"key renamed", map[string]string{"a": "1", "c": "2"}},
		{"key added", map[string]string{"a": "1", "b": "2", "c": "3"}},
		{"key removed", map[string]string{"a": "1"}},
		{"values swapped", map[string]string{"a": "2", "b": "1"}},
		{"all removed", map[string]string{}},
		{"key and value boundary moved", map[string]string{"a1": "", "b": "2"}},
	}
	want := hasher.Of(src, bytesOf(base)).Sum
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := hasher.Of(src, bytesOf(tt.other)).Sum; got == want {
				t.Errorf("Of(%v).Sum == Of(%v).Sum = %s", tt.other, base, got)
			}
		})
	}
}

// TestOfLengthPrefix checks that different key/value splits of the same bytes
// do not collide.
func TestOfLengthPrefix(t *testing.T) {
	pairs := []struct{ a, b map[string]string }{
		{map[string]string{"ab": "c"}, map[string]string{"a": "bc"}},
		{map[string]string{"a": "b", "c": "d"}, map[string]string{"a": "bcd"}},
		{map[string]string{"a": "", "b": ""}, map[string]string{"ab": ""}},
		{map[string]string{"": "ab"}, map[string]string{"a": "b"}},
	}
	for _, p := range pairs {
		if x, y := hasher.Of(src, bytesOf(p.a)).Sum, hasher.Of(src, bytesOf(p.b)).Sum; x == y {
			t.Errorf("Of(%v).Sum == Of(%v).Sum = %s", p.a, p.b, x)
		}
	}
}

func TestOfKeyHashes(t *testing.T) {
	old := hasher.Of(src, bytesOf(map[string]string{"a": "1", "b": "2", "c": "same"}))
	cur := hasher.Of(src, bytesOf(map[string]string{"a": "1", "b": "changed", "c": "same"}))
	if old.Keys["a"] != cur.Keys["a"] || old.Keys["c"] != cur.Keys["c"] {
		t.Errorf("hashes of unchanged keys differ: %v, %v", old.Keys, cur.Keys)
	}
	if old.Keys["b"] == cur.Keys["b"] {
		t.Errorf("hash of changed key b did not change: %s", old.Keys["b"])
	}
	// A key's hash depends on its value alone, not on its name or neighbours.
	if old.Keys["c"] != keyHash("c", "same") {
		t.Errorf("Keys[c] = %s, want %s", old.Keys["c"], keyHash("c", "same"))
	}
}

func TestChangedKeys(t *testing.T) {
	tests := []struct {
		name     string
		old, new map[string]string
		want     []string
	}{
		{"both nil", nil, nil, nil},
		{"equal", map[string]string{"a": "1", "b": "2"}, map[string]string{"a": "1", "b": "2"}, nil},
		{"changed", map[string]string{"a": "1", "b": "2"}, map[string]string{"a": "1", "b": "3"}, []string{"b"}},
		{"added", map[string]string{"a": "1"}, map[string]string{"a": "1", "b": "2"}, []string{"b"}},
		{"removed", map[string]string{"a": "1", "b": "2"}, map[string]string{"a": "1"}, []string{"b"}},
		{"from nil", nil, map[string]string{"b": "1", "a": "1"}, []string{"a", "b"}},
		{"to nil", map[string]string{"b": "1", "a": "1"}, nil, []string{"a", "b"}},
		{"added to empty value", map[string]string{}, map[string]string{"a": ""}, []string{"a"}},
		{
			"added, removed, changed, unchanged: sorted",
			map[string]string{"z": "1", "m": "1", "keep": "1", "c": "1"},
			map[string]string{"z": "2", "a": "1", "keep": "1", "c": "9"},
			[]string{"a", "c", "m", "z"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := hash.ChangedKeys(tt.old, tt.new)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ChangedKeys() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHashesAreBoundToTheirPlace: the same value under another kind,
// namespace, object or key gives an unrelated hash, so recorded hashes can
// neither be matched against hashes of chosen guesses made elsewhere nor
// show that two objects share a value.
func TestHashesAreBoundToTheirPlace(t *testing.T) {
	data := bytesOf(map[string]string{"password": "admin", "pw": "admin"})
	base := hasher.Of(src, data)
	if base.Keys["password"] == base.Keys["pw"] {
		t.Error("the same value under two keys of one object gave the same hash")
	}
	for _, other := range []hash.Source{
		{Kind: "ConfigMap", Namespace: src.Namespace, Name: src.Name},
		{Kind: src.Kind, Namespace: "tenant", Name: src.Name},
		{Kind: src.Kind, Namespace: src.Namespace, Name: "guess"},
		// Length prefixes: moving a character from one field to the next
		// changes the hash.
		{Kind: src.Kind, Namespace: src.Namespace + "d", Name: src.Name[1:]},
	} {
		d := hasher.Of(other, data)
		if d.Keys["password"] == base.Keys["password"] || d.Sum == base.Sum {
			t.Errorf("%+v and %+v gave the same hash for the same value", src, other)
		}
	}
}

// TestIDNamesTheScheme: the ID of a key differs from the ones the earlier
// schemes gave for the same key (v1: unbound hashes; v2: hashes bound to
// their object, keyed with the installation's key itself), so records made
// by them are adopted again rather than compared.
func TestIDNamesTheScheme(t *testing.T) {
	for _, prefix := range []string{"watcher hash key id\x00", "watcher hash key id v2\x00"} {
		old := sha256.Sum256(append([]byte(prefix), testKey...))
		if hasher.ID() == hex.EncodeToString(old[:])[:hash.KeyHashLen] {
			t.Errorf("the key ID is the one of scheme %q: old records would be compared with new hashes", prefix)
		}
	}
}

// TestMAC: a MAC is stable, and depends on the key and the data.
func TestMAC(t *testing.T) {
	a, b := hash.NewHasher([]byte("0123456789abcdef0123")), hash.NewHasher([]byte("another key of 20 bytes"))
	if a.MAC([]byte("x")) != hash.NewHasher([]byte("0123456789abcdef0123")).MAC([]byte("x")) {
		t.Error("MAC not stable")
	}
	if a.MAC([]byte("x")) == b.MAC([]byte("x")) || a.MAC([]byte("x")) == a.MAC([]byte("y")) {
		t.Error("MAC does not depend on the key and the data")
	}
}
