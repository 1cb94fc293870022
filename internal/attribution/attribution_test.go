package attribution_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/watcher-dev/watcher/internal/attribution"
)

var t0 = time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

func entry(manager string, sec int, fields string) metav1.ManagedFieldsEntry {
	tm := metav1.NewTime(at(sec).Add(300 * time.Millisecond)) // cut to the second
	e := metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Time: &tm, FieldsType: "FieldsV1"}
	if fields != "" {
		e.FieldsV1 = metav1.NewFieldsV1(fields)
	}
	return e
}

func w(manager string, sec int) attribution.Writer {
	return attribution.Writer{Manager: manager, Time: at(sec)}
}

func TestFromManagedFields(t *testing.T) {
	tests := []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    []attribution.Writer
	}{
		{name: "none"},
		{
			name: "data, binaryData and stringData count, newest first",
			entries: []metav1.ManagedFieldsEntry{
				entry("kubectl", 1, `{"f:data":{".":{},"f:a":{}}}`),
				entry("helm", 3, `{"f:binaryData":{"f:b":{}}}`),
				entry("vault", 2, `{"f:stringData":{"f:c":{}}}`),
			},
			want: []attribution.Writer{w("helm", 3), w("vault", 2), w("kubectl", 1)},
		},
		{
			name: "metadata only, or a label named data, do not count",
			entries: []metav1.ManagedFieldsEntry{
				entry("labeler", 5, `{"f:metadata":{"f:labels":{"f:data":{}}}}`),
				entry("typer", 6, `{"f:type":{}}`),
			},
		},
		{
			name: "no time or no fields: not kept",
			entries: []metav1.ManagedFieldsEntry{
				{Manager: "old", FieldsV1: metav1.NewFieldsV1(`{"f:data":{}}`)},
				entry("empty", 4, ""),
				entry("broken", 4, `{"f:data"`),
			},
		},
		{
			name: "at most MaxWriters, the newest; equal times by name",
			entries: []metav1.ManagedFieldsEntry{
				entry("a", 1, `{"f:data":{}}`), entry("b", 2, `{"f:data":{}}`), entry("c", 3, `{"f:data":{}}`),
				entry("e", 4, `{"f:data":{}}`), entry("d", 4, `{"f:data":{}}`),
			},
			want: []attribution.Writer{w("d", 4), w("e", 4), w("c", 3), w("b", 2)},
		},
		{
			name:    "unprintable characters replaced, long names cut",
			entries: []metav1.ManagedFieldsEntry{entry("bad\nname", 1, `{"f:data":{}}`), entry(strings.Repeat("x", 200), 1, `{"f:data":{}}`)},
			want:    []attribution.Writer{w("bad?name", 1), w(strings.Repeat("x", 128), 1)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := attribution.FromManagedFields(tt.entries)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("FromManagedFields() (-want +got):\n%s", diff)
			}
			back := attribution.Decode(attribution.Encode(got))
			if !cmp.Equal(got, back, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })) {
				t.Errorf("Decode(Encode()) = %v, want %v", back, got)
			}
		})
	}
}

func TestDecodeMalformed(t *testing.T) {
	got := attribution.Decode("12 a\nnot-a-time b\n\n13 c d")
	want := []string{"a", "c d"}
	if len(got) != 2 || got[0].Manager != want[0] || got[1].Manager != want[1] || got[0].Time.Unix() != 12 {
		t.Errorf("Decode() = %v", got)
	}
}

func TestChanged(t *testing.T) {
	tests := []struct {
		name     string
		old, cur []attribution.Writer
		want     []string
	}{
		{name: "nobody known"},
		{name: "a second writer appears", old: []attribution.Writer{w("a", 10)}, cur: []attribution.Writer{w("b", 12), w("a", 10)}, want: []string{"b"}},
		{name: "ownership moves to the writer", old: []attribution.Writer{w("a", 10)}, cur: []attribution.Writer{w("b", 12)}, want: []string{"b"}},
		{name: "the same writer again", old: []attribution.Writer{w("a", 10)}, cur: []attribution.Writer{w("a", 11)}, want: []string{"a"}},
		{name: "same second: the newest", old: []attribution.Writer{w("a", 10), w("b", 9)}, cur: []attribution.Writer{w("a", 10), w("b", 9)}, want: []string{"a"}},
		{name: "two moved", old: []attribution.Writer{w("a", 1), w("b", 1)}, cur: []attribution.Writer{w("b", 3), w("a", 2)}, want: []string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, attribution.Changed(tt.old, tt.cur)); diff != "" {
				t.Errorf("Changed() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSince(t *testing.T) {
	ws := []attribution.Writer{w("c", 30), w("b", 20), w("a", 10), w("b", 5)}
	for _, tt := range []struct {
		since time.Time
		want  []string
	}{
		{at(0), []string{"a", "b", "c"}},
		{at(20).Add(500 * time.Millisecond), []string{"b", "c"}}, // same second counts
		{at(31), nil},
	} {
		if diff := cmp.Diff(tt.want, attribution.Since(ws, tt.since)); diff != "" {
			t.Errorf("Since(%v) (-want +got):\n%s", tt.since, diff)
		}
	}
}

func TestJoin(t *testing.T) {
	for _, tt := range []struct {
		in   []string
		want string
	}{
		{nil, "an unknown writer"},
		{[]string{"a"}, "a"},
		{[]string{"a", "b"}, "a and b"},
		{[]string{"a", "b", "c"}, "a, b and c"},
	} {
		if got := attribution.Join(tt.in); got != tt.want {
			t.Errorf("Join(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestAnnotationIsInvalid: no object from the API server can carry it.
func TestAnnotationIsInvalid(t *testing.T) {
	if errs := apivalidation.ValidateAnnotations(map[string]string{attribution.Annotation: "1 x"}, field.NewPath("a")); len(errs) == 0 {
		t.Error("Annotation is a valid annotation key")
	}
}
