package refs

import (
	"errors"
	"fmt"
	"strings"
)

// reserved are the bytes that have a meaning in the encoded form, escaped
// wherever they occur in a name or key.
const reserved = "%;:,*/!"

const upperHex = "0123456789ABCDEF"

// Encode writes refs compactly, one entry per Ref, separated by ";":
//
//	ConfigMap/cfg:*;Secret/tls:!ca.crt,tls.key
//
// An entry is the kind, "/", the name, ":", then "*" when the pod reads
// every key, else the keys it reads separated by ",", each required key (see
// Ref.Required) marked with a leading "!". A key of Required that is not in
// Keys is not written. An optional object (Ref.Optional) is marked with a
// leading "?" before its kind.
//
// The API server checks little more than that the names and keys a pod spec
// refers to are not empty, so they may hold any character. The bytes that
// have a meaning here (% ; : , * / !) are percent-encoded wherever they
// occur ("x;y" is written "x%3By"); every other byte, UTF-8 or not, is
// written as it is, so that ordinary names cost nothing more. An empty name
// or key is written as a bare "%", which no escape produces. Decode reads
// back exactly what Encode wrote.
func Encode(rs []Ref) string {
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(';')
		}
		if r.Optional {
			b.WriteByte('?')
		}
		b.WriteString(string(r.Kind))
		b.WriteByte('/')
		escape(&b, r.Name)
		b.WriteByte(':')
		if r.AllKeys {
			b.WriteByte('*')
			continue
		}
		for j, k := range r.Keys {
			if j > 0 {
				b.WriteByte(',')
			}
			if r.Requires(k) {
				b.WriteByte('!')
			}
			escape(&b, k)
		}
	}
	return b.String()
}

// escape writes s to b with every reserved byte percent-encoded, and an
// empty s as a bare "%".
func escape(b *strings.Builder, s string) {
	if s == "" {
		b.WriteByte('%')
		return
	}
	for {
		i := strings.IndexAny(s, reserved)
		if i < 0 {
			b.WriteString(s)
			return
		}
		b.WriteString(s[:i])
		b.WriteByte('%')
		b.WriteByte(upperHex[s[i]>>4])
		b.WriteByte(upperHex[s[i]&0xF])
		s = s[i+1:]
	}
}

// Decode reads what Encode wrote. Any other input, keys out of order or
// repeated included, yields an error, never a panic, so that what Decode
// returns holds to the doc of Ref.
func Decode(s string) ([]Ref, error) {
	if s == "" {
		return nil, nil
	}
	out := make([]Ref, 0, strings.Count(s, ";")+1)
	for entry := range strings.SplitSeq(s, ";") {
		r, err := decodeRef(entry)
		if err != nil {
			return nil, fmt.Errorf("decode references: entry %q: %w", entry, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// decodeRef reads one entry: [?]kind/name:keys.
func decodeRef(entry string) (Ref, error) {
	entry, optional := strings.CutPrefix(entry, "?")
	kind, rest, ok := strings.Cut(entry, "/")
	if !ok || (Kind(kind) != ConfigMap && Kind(kind) != Secret) {
		return Ref{}, errors.New("no known kind")
	}
	name, keys, ok := strings.Cut(rest, ":")
	if !ok {
		return Ref{}, errors.New("no keys")
	}
	r := Ref{Kind: ConfigMap, AllKeys: keys == "*", Optional: optional}
	if Kind(kind) == Secret {
		r.Kind = Secret
	}
	var err error
	if r.Name, err = unescape(name); err != nil {
		return Ref{}, fmt.Errorf("name: %w", err)
	}
	if r.AllKeys || keys == "" {
		return r, nil
	}
	r.Keys = make([]string, 0, strings.Count(keys, ",")+1)
	for k := range strings.SplitSeq(keys, ",") {
		required := strings.HasPrefix(k, "!")
		key, err := unescape(strings.TrimPrefix(k, "!"))
		if err != nil {
			return Ref{}, fmt.Errorf("key: %w", err)
		}
		if n := len(r.Keys); n > 0 && key <= r.Keys[n-1] {
			return Ref{}, fmt.Errorf("key %q out of order", key)
		}
		r.Keys = append(r.Keys, key)
		if required {
			r.Required = append(r.Required, key)
		}
	}
	return r, nil
}

// unescape reverses escape. It rejects an empty s and an unescaped reserved
// byte, so that only what escape writes is read.
func unescape(s string) (string, error) {
	switch {
	case s == "":
		return "", errors.New("empty")
	case s == "%":
		return "", nil
	case !strings.ContainsAny(s, reserved):
		return s, nil
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%':
			if i+2 >= len(s) {
				return "", fmt.Errorf("truncated escape in %q", s)
			}
			hi, lo := unhex(s[i+1]), unhex(s[i+2])
			if hi < 0 || lo < 0 {
				return "", fmt.Errorf("bad escape in %q", s)
			}
			b.WriteByte(byte(hi<<4 | lo))
			i += 2
		case strings.IndexByte(reserved, c) >= 0:
			return "", fmt.Errorf("unescaped %q in %q", c, s)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// unhex returns the value of the hexadecimal digit c, or -1.
func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'A' <= c && c <= 'F':
		return int(c - 'A' + 10)
	case 'a' <= c && c <= 'f':
		return int(c - 'a' + 10)
	}
	return -1
}
