package refs_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/watcher-dev/watcher/internal/refs"
)

// oddNames are names and keys the API server accepts in a pod spec's
// references (it checks only that they are not empty), each holding bytes
// that mean something in the encoded form.
var oddNames = []string{
	"x;y", "a:b", "a,b", "*", "%", "a/b", "!", "!a", "a!", "a*", "%3B", "%%", "a%",
	"ünï/cødé", "名前", "a b", "\t", "\xff\xfe", "a\x00b", ":;,*/!%", "-",
}

func TestEncode(t *testing.T) {
	tests := []struct {
		name string
		refs []refs.Ref
		want string
	}{
		{"none", nil, ""},
		{"all keys and keys", []refs.Ref{cmAll("a"), sec("b", "x", "y")}, "ConfigMap/a:*;Secret/b:x,y"},
		{"ordinary names and keys as they are", []refs.Ref{cm("app-config.v1", "A_B-c", "log.level")}, "ConfigMap/app-config.v1:A_B-c,log.level"},
		{"no keys", []refs.Ref{sec("c")}, "Secret/c:"},
		{"reserved bytes in a name", []refs.Ref{cmAll("x;y"), cmAll("a:b"), secAll("a,b"), secAll("*/!%")}, "ConfigMap/x%3By:*;ConfigMap/a%3Ab:*;Secret/a%2Cb:*;Secret/%2A%2F%21%25:*"},
		{"reserved bytes in keys", []refs.Ref{cm("cfg", "*", "a,b", "x;y")}, "ConfigMap/cfg:%2A,a%2Cb,x%3By"},
		{"a key that looks like an escape", []refs.Ref{cm("cfg", "%3B")}, "ConfigMap/cfg:%253B"},
		{"other bytes as they are", []refs.Ref{cm("ünï", "a b", "名前")}, "ConfigMap/ünï:a b,名前"},
		{"empty name and key as a bare %", []refs.Ref{cm("", "")}, "ConfigMap/%:%"},
		{"required keys marked", []refs.Ref{req(sec("tls", "ca.crt", "tls.key"), "ca.crt"), req(cm("b", "x", "y"), "x", "y")}, "Secret/tls:!ca.crt,tls.key;ConfigMap/b:!x,!y"},
		{"required odd keys", []refs.Ref{req(cm("cfg", "!", "!a", "%", "a"), "!", "!a", "%")}, "ConfigMap/cfg:!%21,!%21a,!%25,a"},
		{"required empty key", []refs.Ref{req(cm("cfg", ""), "")}, "ConfigMap/cfg:!%"},
		{"no required key with every key", []refs.Ref{req(cmAll("cfg"), "k")}, "ConfigMap/cfg:*"},
		{"a required key not among the keys is not written", []refs.Ref{req(cm("cfg", "a"), "b")}, "ConfigMap/cfg:a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := refs.Encode(tt.refs); got != tt.want {
				t.Errorf("Encode() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDecodeRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		refs []refs.Ref
	}{
		{"none", nil},
		{"all keys", []refs.Ref{cmAll("cfg")}},
		{"keys, all keys, no keys", []refs.Ref{cm("a", "k-2", "k.1"), secAll("b"), sec("c")}},
		{"odd names", []refs.Ref{cmAll("x;y"), cm("a:b", "k"), secAll("a,b"), secAll("*"), cmAll("%"), cmAll("a/b"), cmAll("ünï")}},
		{"odd keys", []refs.Ref{cm("cfg", sorted(oddNames...)...)}},
		{"every odd name", func() []refs.Ref {
			var rs []refs.Ref
			for _, n := range oddNames {
				rs = append(rs, cm(n, n), secAll(n))
			}
			return rs
		}()},
		{"empty name and key", []refs.Ref{cm("", "", "a")}},
		{"required keys", []refs.Ref{req(cm("a", "k", "l", "m"), "k", "m"), req(sec("b", "x"), "x")}},
		{"required odd keys", []refs.Ref{req(cm("cfg", sorted(oddNames...)...), sorted(oddNames...)...)}},
		{"required empty key", []refs.Ref{req(cm("cfg", "", "a"), "")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := refs.Encode(tt.refs)
			got, err := refs.Decode(s)
			if err != nil {
				t.Fatalf("Decode(%q): %v", s, err)
			}
			if diff := cmp.Diff(tt.refs, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("round trip of %q (-want +got):\n%s", s, diff)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, bad := range []string{
		"ConfigMap/a",       // no keys
		"Pod/a:*",           // unknown kind
		"a:b",               // no kind
		"/a:*",              // empty kind
		"ConfigMap/:*",      // empty name, not written as %
		"ConfigMap/a:b,",    // empty key, not written as %
		"ConfigMap/a:,b",    // empty key, not written as %
		"ConfigMap/x;y:*",   // unescaped ";" splits the entry
		"ConfigMap/a:b:c",   // unescaped ":" in a key
		"ConfigMap/a/b:*",   // unescaped "/" in a name
		"ConfigMap/a:b*",    // unescaped "*" in a key
		"ConfigMap/a:b,*",   // "*" among keys
		"ConfigMap/a%:*",    // truncated escape
		"ConfigMap/a%4:*",   // truncated escape
		"ConfigMap/a%zz:*",  // not hexadecimal
		"ConfigMap/a:%%",    // not an escape
		"ConfigMap/a:b,a",   // keys out of order
		"ConfigMap/a:b,b",   // key repeated
		"ConfigMap/a:*;",    // empty entry
		";ConfigMap/a:*",    // empty entry
		"configmap/a:*",     // kinds are case-sensitive
		"ConfigMap/a:*;Pod", // one bad entry spoils all
		"ConfigMap/a:!",     // empty required key, not written as !%
		"ConfigMap/a:!!b",   // unescaped "!" in a key
		"ConfigMap/a:b!",    // unescaped "!" in a key
		"ConfigMap/a:!*",    // "*" as a required key
		"ConfigMap/!a:*",    // unescaped "!" in a name
		"ConfigMap/a:!b,a",  // keys out of order
	} {
		if got, err := refs.Decode(bad); err == nil {
			t.Errorf("Decode(%q) = %+v, want an error", bad, got)
		}
	}
}

// FuzzEncodeDecode checks that Decode reads back exactly what Encode wrote
// whatever the names, keys and required keys, and that Decode never panics and never
// returns what Encode would not write the same way again.
//
//	go test -fuzz=FuzzEncodeDecode ./internal/refs/
func FuzzEncodeDecode(f *testing.F) {
	for i, n := range oddNames {
		f.Add(n, n, "k", oddNames[(i+1)%len(oddNames)], uint8(i), "ConfigMap/"+n+":*")
	}
	for _, raw := range []string{
		"", "ConfigMap/cfg:*;Secret/tls:ca.crt,tls.key", "ConfigMap/x%3By:%2A,a%2Cb", "Secret/%:%",
		"ConfigMap/a:", "ConfigMap/a%", "ConfigMap/a:%3", ";;", "Secret/a:b,a", "ConfigMap/%c3%a9:*",
		"Secret/tls:!ca.crt,tls.key", "ConfigMap/a:!", "ConfigMap/a:!%,!%21", "ConfigMap/a:!!",
	} {
		f.Add("cfg", "a", "b", "c", uint8(0), raw)
	}
	f.Fuzz(func(t *testing.T, name, key1, key2, key3 string, flags uint8, raw string) {
		rs := fuzzRefs(name, []string{key1, key2, key3}, flags)
		s := refs.Encode(rs)
		got, err := refs.Decode(s)
		if err != nil {
			t.Fatalf("Decode(Encode(%+v)) = Decode(%q): %v", rs, s, err)
		}
		if diff := cmp.Diff(rs, got, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip of %q (-want +got):\n%s", s, diff)
		}

		decoded, err := refs.Decode(raw)
		if err != nil {
			return
		}
		again, err := refs.Decode(refs.Encode(decoded))
		if err != nil {
			t.Fatalf("Decode(%q) = %+v, which does not encode and decode again: %v", raw, decoded, err)
		}
		if diff := cmp.Diff(decoded, again, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("Decode(%q) changes through Encode (-first +second):\n%s", raw, diff)
		}
	})
}

// fuzzRefs builds two references from fuzzed values: name with keys (all
// keys when flags has bit 1), of the kind bit 0 says, key i required when
// flags has bit 2+i, optional when flags has bit 7, and a Secret named
// after the first key.
func fuzzRefs(name string, keys []string, flags uint8) []refs.Ref {
	r := refs.Ref{Kind: refs.ConfigMap, Name: name, Optional: flags&128 != 0}
	if flags&1 != 0 {
		r.Kind = refs.Secret
	}
	if flags&2 != 0 {
		r.AllKeys = true
		return []refs.Ref{r, secAll(keys[0])}
	}
	r.Keys = sorted(keys...)
	var required []string
	for i, k := range keys {
		if flags&(4<<i) != 0 {
			required = append(required, k)
		}
	}
	r.Required = sorted(required...)
	return []refs.Ref{r, secAll(keys[0])}
}

// sorted returns keys sorted, each once, as Ref.Keys holds them.
func sorted(keys ...string) []string {
	out := slices.Clone(keys)
	slices.Sort(out)
	return slices.Compact(out)
}
