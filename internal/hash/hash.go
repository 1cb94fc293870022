// Package hash reduces ConfigMap and Secret contents to digests.
//
// watcher never needs the contents of a ConfigMap or Secret, only whether
// they changed, and which keys. Hasher.Transform runs on every object on its
// way into the informer cache and replaces it by its metadata and its Digest:
// a hash of the whole content and a short hash per key. The cache then holds
// metadata and hashes only, so memory does not grow with the size of the
// Secrets in the cluster, and no Secret value can leak from it.
//
// What is hashed: the keys and bytes of data and binaryData together (a key
// cannot be in both), sorted by key. Nothing else (labels, annotations, type,
// immutable) takes part, so a metadata-only edit leaves the digest unchanged.
//
// The hashes are keyed (HMAC-SHA256) with a secret key. They end up in
// workload annotations, which many more people can read than Secrets; with a
// plain hash, a weak Secret value ("admin") could be found by hashing guesses.
//
// Every hash is also bound to where the value lives: the HMAC input is the
// length-prefixed kind, namespace, name and key, then the value. Without it a
// tenant who can create a ConfigMap and a Deployment in their own namespace
// would get watcher to record the hashes of chosen guesses, to compare with
// the hashes recorded on workloads they can read elsewhere; and equal hashes
// would show which namespaces share a password. With it, the same value under
// two objects or two keys gives unrelated hashes.
//
// The key of the HMAC is not the installation's key itself but one derived
// from it per namespace (NamespaceKey: HMAC-SHA256 of the installation key
// and "watcher/namespace/" + namespace). Whoever holds the key of namespace A,
// to explain its workloads (watcher explain), can compute A's hashes and
// nothing else: the key of A says nothing of the key of B, so it tests no
// guess against the hashes recorded in B.
package hash

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	stdhash "hash"
	"slices"
)

// KeyHashLen is the length in hex digits of a per-key hash: 64 bits of
// SHA-256, plenty to tell one value of a key from the next.
const KeyHashLen = 16

// Digest is what watcher keeps of a ConfigMap's or Secret's content.
type Digest struct {
	// Sum is the hex HMAC-SHA256 of all keys and values.
	Sum string
	// Keys maps each key to a short hash of its value.
	Keys map[string]string
}

// Hasher computes digests keyed with the installation's key, through the
// key of each object's namespace.
type Hasher struct {
	key []byte
	id  string
}

// scheme names how hashes are computed. It takes part in the key ID, so that
// records made by an older scheme are never compared with this one's hashes:
// they are adopted again, never restarted. Version 2 bound every hash to its
// object and key; version 3 keys it with the key of its namespace.
const scheme = "watcher hash key id v3\x00"

// NewHasher returns a Hasher keyed with key, the installation's key.
func NewHasher(key []byte) *Hasher {
	return &Hasher{key: slices.Clone(key), id: keyID(key)}
}

// keyID names an installation key under this scheme.
func keyID(key []byte) string {
	id := sha256.Sum256(append([]byte(scheme), key...))
	return hex.EncodeToString(id[:])[:KeyHashLen]
}

// ID names the installation's key (and this scheme) without revealing it.
// Records made with another key cannot be compared with this Hasher's
// digests.
func (h *Hasher) ID() string { return h.id }

// Source is where a content lives: its kind (ConfigMap or Secret),
// namespace and name. It takes part in every hash.
type Source struct {
	Kind, Namespace, Name string
}

// Of returns the digest of the content of src, which may be nil, keyed
// with the key of src's namespace.
func (h *Hasher) Of(src Source, data map[string][]byte) Digest {
	return digest(deriveKey(h.key, src.Namespace), src, data)
}

// digest returns the digest of the content of src keyed with key.
func digest(key []byte, src Source, data map[string][]byte) Digest {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	slices.Sort(keys)

	whole := hmac.New(sha256.New, key)
	one := hmac.New(sha256.New, key)
	d := Digest{Keys: make(map[string]string, len(keys))}
	writeSource(whole, src)
	for _, k := range keys {
		v := data[k]
		one.Reset()
		writeSource(one, src)
		writeField(one, []byte(k))
		writeField(one, v)
		d.Keys[k] = hex.EncodeToString(one.Sum(nil))[:KeyHashLen]
		writeField(whole, []byte(k))
		writeField(whole, v)
	}
	d.Sum = hex.EncodeToString(whole.Sum(nil))
	return d
}

// writeSource writes the kind, namespace and name of src, each with its
// length in front.
func writeSource(w stdhash.Hash, src Source) {
	writeField(w, []byte(src.Kind))
	writeField(w, []byte(src.Namespace))
	writeField(w, []byte(src.Name))
}

// writeField writes b with its length in front, so that no two different
// key/value sequences feed the same bytes to the hash.
func writeField(w stdhash.Hash, b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	_, _ = w.Write(n[:])
	_, _ = w.Write(b)
}

// ChangedKeys returns, sorted, the keys whose hash differs between old and
// new, including keys present in only one of them.
func ChangedKeys(old, new map[string]string) []string {
	var out []string
	for k, v := range new {
		if ov, ok := old[k]; !ok || ov != v {
			out = append(out, k)
		}
	}
	for k := range old {
		if _, ok := new[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
