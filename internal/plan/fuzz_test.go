package plan_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
)

// FuzzParseRecord: any annotation value, written by anyone who can edit a
// workload, either fails to parse or parses to a record that encodes back
// to a value parsing to the same record, and Decide never panics on it.
func FuzzParseRecord(f *testing.F) {
	for _, s := range []string{
		`{}`, `null`, `{"ConfigMap/a":null}`, `{"ConfigMap/a":{"keys":{"k":"1","l":""}}}`,
		`{"Secret/b":{"all":true,"keys":{"x":"2"}}}`, `{"Secret/d":{"all":true,"sum":"ab"}}`,
		`{"ConfigMap/a":{"keys":null}}`, `{"":{}}`, `[`, `{"a":{"all":1}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := plan.ParseRecord(s)
		if err != nil {
			if r != nil {
				t.Fatalf("ParseRecord(%q) returned a record with an error", s)
			}
			return
		}
		again, err := plan.ParseRecord(r.String())
		if err != nil {
			t.Fatalf("ParseRecord(String()) of %q: %v", s, err)
		}
		if again.String() != r.String() {
			t.Fatalf("round trip of %q: %s then %s", s, r, again)
		}
		// Decide takes any record without panicking.
		uses := []refs.Ref{{Kind: refs.ConfigMap, Name: "a", AllKeys: true}, {Kind: refs.ConfigMap, Name: "b", Keys: []string{"k"}, Required: []string{"k"}}}
		for id := range r {
			if kind, name, ok := strings.Cut(id, "/"); ok && (kind == "ConfigMap" || kind == "Secret") {
				uses = append(uses, refs.Ref{Kind: refs.Kind(kind), Name: name, Keys: []string{"k"}})
			}
		}
		for _, restartOnCreate := range []bool{false, true} {
			_ = plan.Decide(plan.Input{Refs: uses, Recorded: r, RestartOnCreate: restartOnCreate, Configs: map[string]plan.Config{
				"ConfigMap/a": {Present: true, Keys: map[string]string{"k": "1"}},
			}})
		}
	})
}

// FuzzOptedOut: any annotation value gives an answer, and an error never
// quotes the value (on a Secret, it could be anything).
func FuzzOptedOut(f *testing.F) {
	for _, s := range []string{"false", "False", "0", "true", "", " false", "hunter2", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		out, err := plan.OptedOut(map[string]string{"require-restart": v}, "require-restart")
		if err != nil && out {
			t.Fatalf("OptedOut(%q) opted out with an error", v)
		}
		if err != nil && strings.Contains(err.Error(), strconv.Quote(v)) {
			t.Fatalf("error %q quotes the value", err)
		}
	})
}
