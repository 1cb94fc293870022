package controller

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/workload"
)

// TestNoteOf: Event notes always fit in the API server's limit, say how
// many parts were left out, and are never cut inside a character.
func TestNoteOf(t *testing.T) {
	many := make([]string, 200)
	for i := range many {
		many[i] = fmt.Sprintf("ConfigMap config-%03d changed (keys: LOG_LEVEL; 1c0e9b2a→77d3fa10)", i)
	}
	tests := []struct {
		name     string
		parts    []string
		wantTail string
	}{
		{"few parts: all there", many[:3], many[2]},
		{"many parts: a count of the rest", many, "more"},
		{"one huge part: cut and marked", []string{strings.Repeat("é", 2000)}, "…"},
		{"exactly at the limit: nothing left out", []string{strings.Repeat("x", maxNote-len("p: "))}, "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := noteOf("p: ", tt.parts)
			if len(got) > maxNote {
				t.Errorf("note of %d bytes, over %d", len(got), maxNote)
			}
			if !utf8.ValidString(got) {
				t.Error("note cut inside a character")
			}
			if !strings.HasSuffix(got, tt.wantTail) {
				t.Errorf("note ends %q, want it to end with %q", got[max(0, len(got)-80):], tt.wantTail)
			}
		})
	}
	got := noteOf("p: ", many)
	shown := strings.Count(got, "changed (keys")
	if !strings.HasSuffix(got, fmt.Sprintf("; and %d more", len(many)-shown)) {
		t.Errorf("%d parts shown, but the note says %q", shown, got[len(got)-20:])
	}
}

// TestPatchFor: the exact patches, one per action.
func TestPatchFor(t *testing.T) {
	rec := plan.Record{"ConfigMap/cfg": {All: true, Keys: map[string]string{"a": "1"}}}
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "7"}}
	tests := []struct {
		action plan.Action
		want   string
	}{
		{plan.Forget, `{"metadata":{"annotations":{"watcher.dev/config-hashes":null,"watcher.dev/hash-key":null},"resourceVersion":"7"}}`},
		{plan.Adopt, `{"metadata":{"annotations":{"watcher.dev/config-hashes":"{\"ConfigMap/cfg\":{\"all\":true,\"keys\":{\"a\":\"1\"}}}","watcher.dev/hash-key":"k1"},"resourceVersion":"7"}}`},
		{plan.Restart, `{"metadata":{"annotations":{"watcher.dev/config-hashes":"{\"ConfigMap/cfg\":{\"all\":true,\"keys\":{\"a\":\"1\"}}}","watcher.dev/hash-key":"k1"},"resourceVersion":"7"},"spec":{"template":{"metadata":{"annotations":{"watcher.dev/restarted-for":"` + rec.RestartID() + `"}}}}}`},
	}
	for _, tt := range tests {
		pt, patch := patchFor(obj, plan.Plan{Action: tt.action, Record: rec}, "k1", workload.Deployment, restart.Annotation{})
		if got := string(patch); got != tt.want {
			t.Errorf("%v:\n got %s\nwant %s", tt.action, got, tt.want)
		}
		if pt != types.MergePatchType {
			t.Errorf("%v: patch type %s, want %s", tt.action, pt, types.MergePatchType)
		}
	}
}

// TestPatchForNestedTemplate: the restart annotation goes where the kind
// keeps its pod template.
func TestPatchForNestedTemplate(t *testing.T) {
	rec := plan.Record{"ConfigMap/cfg": nil}
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "7"}}
	_, patch := patchFor(obj, plan.Plan{Action: plan.Restart, Record: rec}, "k1", cronJob, restart.Annotation{})
	got := string(patch)
	want := `{"metadata":{"annotations":{"watcher.dev/config-hashes":"{\"ConfigMap/cfg\":null}","watcher.dev/hash-key":"k1"},"resourceVersion":"7"},"spec":{"jobTemplate":{"spec":{"template":{"metadata":{"annotations":{"watcher.dev/restarted-for":"` + rec.RestartID() + `"}}}}}}}`
	if got != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
}
