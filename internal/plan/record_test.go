package plan_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/watcher-dev/watcher/internal/plan"
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestParseRecord(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want plan.Record
	}{
		{
			"entries, nil and empty entries distinct",
			`{"ConfigMap/a":{"keys":{"k":"1","l":""}},"Secret/b":null,"Secret/c":{"all":true,"keys":{"x":"2"}},"Secret/d":{"all":true,"sum":"ab"}}`,
			plan.Record{cmA: entry("k", "1", "l", ""), "Secret/b": nil, "Secret/c": all("x", "2"), "Secret/d": {All: true, Digest: "ab"}},
		},
		{"empty object", `{}`, plan.Record{}},
		{"null: empty, non-nil", `null`, plan.Record{}},
		{"blanks around", " \n{\"Secret/a\":null}\n", plan.Record{secA: nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := plan.ParseRecord(tt.in)
			if err != nil {
				t.Fatalf("ParseRecord(%q) error: %v", tt.in, err)
			}
			if got == nil {
				t.Fatalf("ParseRecord(%q) = nil, want a non-nil record", tt.in)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseRecord(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestParseRecordErrors(t *testing.T) {
	for _, in := range []string{``, `{`, `[]`, `"x"`, `{"ConfigMap/a":"x"}`, `{"ConfigMap/a":{"keys":{"k":1}}}`, `{"ConfigMap/a":{"all":"yes"}}`, `{"a":{}} trailing`} {
		got, err := plan.ParseRecord(in)
		if err == nil {
			t.Errorf("ParseRecord(%q) = %v, want an error", in, got)
			continue
		}
		if got != nil {
			t.Errorf("ParseRecord(%q) = %v with an error, want nil", in, got)
		}
		if !strings.Contains(err.Error(), plan.RecordAnnotation) {
			t.Errorf("ParseRecord(%q) error %q does not name %s", in, err, plan.RecordAnnotation)
		}
	}
}

func TestRecordString(t *testing.T) {
	tests := []struct {
		name string
		in   plan.Record
		want string
	}{
		{"nil record", nil, `null`},
		{"empty record", plan.Record{}, `{}`},
		{"sorted keys, nil, empty and all entries", plan.Record{"Secret/z": entry("y", "2", "x", ""), cmA: nil, cmB: all()},
			`{"ConfigMap/a":null,"ConfigMap/b":{"all":true},"Secret/z":{"keys":{"x":"","y":"2"}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.String(); got != tt.want {
				t.Errorf("String() = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []plan.Record{
		{},
		{cmA: nil},
		{cmA: entry("k", "")},
		{cmA: entry("k", "1"), secA: nil, cmB: all("a/b", "x\"y", "é", "")},
		{cmA: {All: true, Digest: "0123"}},
	} {
		got, err := plan.ParseRecord(r.String())
		if err != nil {
			t.Fatalf("ParseRecord(%s): %v", r, err)
		}
		if diff := cmp.Diff(r, got); diff != "" {
			t.Errorf("round trip of %s mismatch (-want +got):\n%s", r, diff)
		}
	}
}

// build returns the same record, filled in the given order of IDs.
func build(order []string) plan.Record {
	entries := map[string]*plan.Entry{cmA: entry("k", "1", "l", "2", "m", "3"), cmB: nil, secA: all(), "Secret/b": entry("p", "9")}
	r := plan.Record{}
	for _, id := range order {
		r[id] = entries[id]
	}
	return r
}

func TestRecordStringAndRestartIDDeterministic(t *testing.T) {
	want := build([]string{cmA, cmB, secA, "Secret/b"})
	for i, order := range [][]string{{"Secret/b", secA, cmB, cmA}, {cmB, "Secret/b", cmA, secA}} {
		got := build(order)
		for j := 0; j < 20; j++ {
			if got.String() != want.String() {
				t.Fatalf("order %d: String() = %s, want %s", i, got, want)
			}
			if got.RestartID() != want.RestartID() {
				t.Fatalf("order %d: RestartID() = %s, want %s", i, got.RestartID(), want.RestartID())
			}
		}
	}
}

func TestRestartID(t *testing.T) {
	base := plan.Record{cmA: entry("k", "1")}
	if got, want := base.RestartID(), sha(`{"ConfigMap/a":{"keys":{"k":"1"}}}`)[:16]; got != want {
		t.Errorf("RestartID() = %s, want %s", got, want)
	}
	// Every configuration below differs from the others in one way.
	variants := map[string]plan.Record{
		"base":               base,
		"other hash":         {cmA: entry("k", "2")},
		"other key":          {cmA: entry("l", "1")},
		"extra key":          {cmA: entry("k", "1", "l", "1")},
		"other object":       {cmB: entry("k", "1")},
		"other kind":         {"Secret/a": entry("k", "1")},
		"extra object":       {cmA: entry("k", "1"), cmB: nil},
		"absent key":         {cmA: entry("k", "")},
		"all keys":           {cmA: all("k", "1")},
		"summarized":         {cmA: {Digest: "1"}},
		"nil entry":          {cmA: nil},
		"empty record":       {},
		"key and hash swapt": {cmA: entry("1", "k")},
	}
	seen := map[string]string{}
	for name, r := range variants {
		id := r.RestartID()
		if len(id) != 16 || strings.Trim(id, "0123456789abcdef") != "" {
			t.Errorf("%s: RestartID() = %q, want 16 hex digits", name, id)
		}
		if other, ok := seen[id]; ok {
			t.Errorf("%s and %s have the same RestartID %s", name, other, id)
		}
		seen[id] = name
	}
}

func TestEntrySum(t *testing.T) {
	tests := []struct {
		name string
		in   *plan.Entry
		want string
	}{
		{"nil", nil, "none"},
		{"all, empty", all(), sha(`{"all":true}`)[:8]},
		{"one key", entry("k", "1"), sha(`{"keys":{"k":"1"}}`)[:8]},
		{"sorted keys", entry("l", "2", "k", "1"), sha(`{"keys":{"k":"1","l":"2"}}`)[:8]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.Sum(); got != tt.want {
				t.Errorf("Sum() = %q, want %q", got, tt.want)
			}
		})
	}
	if entry("k", "1").Sum() == entry("k", "2").Sum() {
		t.Error("entries with different hashes have the same Sum")
	}
}
