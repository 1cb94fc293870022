package hash

import (
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
)

// The annotations of a stored object hold the digest's hashes as raw bytes,
// not as the hex text Digest carries: half the memory for each of the tens
// of thousands of objects the cache may hold. FromObject gives them back as
// hex, so the representation never leaves this file.
//
//	annotation      Digest     stored
//	SumAnnotation   Sum        its 32 bytes
//	KeysAnnotation  Keys       "key=" and the 8 bytes of its hash, then
//	                           "," and the next key, sorted by key

// keyHashBytes is the length in bytes of a per-key hash.
const keyHashBytes = KeyHashLen / 2

// EncodeSum writes a digest's Sum as SumAnnotation holds it, for the
// transforms of other kinds (see package sealed); FromObject reads it.
func EncodeSum(sum string) string { return rawOf(sum) }

// EncodeKeys writes key hashes as KeysAnnotation holds them, for the
// transforms of other kinds (see package sealed); FromObject reads them.
func EncodeKeys(keys map[string]string) string { return encodeKeys(keys) }

// encodeKeys writes key hashes as KeysAnnotation holds them. ConfigMap and
// Secret keys cannot hold "=" or ","; the raw hashes may, which is why
// decodeKeys reads them by length.
func encodeKeys(keys map[string]string) string {
	names := make([]string, 0, len(keys))
	n := max(len(keys)-1, 0) // the commas
	for k := range keys {
		names = append(names, k)
		n += len(k) + 1 + keyHashBytes
	}
	sort.Strings(names)
	// The string is kept as built: room for exactly its bytes.
	var b strings.Builder
	b.Grow(n)
	for i, k := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(rawOf(keys[k]))
	}
	return b.String()
}

// decodeKeys reads what encodeKeys wrote, the hashes back in hex.
func decodeKeys(s string) (map[string]string, error) {
	out := map[string]string{}
	for rest := s; rest != ""; {
		k, after, ok := strings.Cut(rest, "=")
		if !ok || len(after) < keyHashBytes {
			return nil, fmt.Errorf("bad digest entry after %d bytes", len(s)-len(rest))
		}
		out[k] = hex.EncodeToString([]byte(after[:keyHashBytes]))
		rest = after[keyHashBytes:]
		if rest != "" {
			if rest[0] != ',' {
				return nil, fmt.Errorf("bad digest entry after %d bytes", len(s)-len(rest))
			}
			rest = rest[1:]
		}
	}
	return out, nil
}

// rawOf returns the bytes of a hex hash. Digests are made by this package,
// so h is always hex; anything else is kept as it is, and FromObject then
// finds it of the wrong length.
func rawOf(h string) string {
	b, err := hex.DecodeString(h)
	if err != nil {
		return h
	}
	return string(b)
}
