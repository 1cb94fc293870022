package gather

import (
	"testing"

	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
)

// TestRecord: one row per line of Record's table.
func TestRecord(t *testing.T) {
	rec := plan.Record{"ConfigMap/x": &plan.Entry{All: true, Keys: map[string]string{"a": "1"}}}
	version := plan.FormatVersion(rec, "7").(string)
	tests := []struct {
		name        string
		ann         map[string]string
		keyID       string
		state       string
		kept        bool
		wantVersion string
	}{
		{"no record", map[string]string{}, "k", RecordAbsent, false, ""},
		{"not a record", map[string]string{plan.RecordAnnotation: "{oops", plan.HashKeyAnnotation: "k"}, "k", RecordUnreadable, false, ""},
		{"the hash key not known", map[string]string{plan.RecordAnnotation: rec.String(), plan.HashKeyAnnotation: "k"}, "", RecordUnknownKey, true, ""},
		{"made with the key", map[string]string{plan.RecordAnnotation: rec.String(), plan.HashKeyAnnotation: "k", plan.VersionAnnotation: version}, "k", RecordCurrent, true, "7"},
		{"made with another key", map[string]string{plan.RecordAnnotation: rec.String(), plan.HashKeyAnnotation: "j", plan.VersionAnnotation: version}, "k", RecordOtherKey, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Record(tt.ann, tt.keyID)
			if got.State != tt.state || (got.Record != nil) != tt.kept || (got.Err != nil) != (tt.state == RecordUnreadable) {
				t.Errorf("Record() = %+v; want state %s, record kept %v", got, tt.state, tt.kept)
			}
			if tt.state == RecordCurrent && got.Version != tt.wantVersion {
				t.Errorf("version %q, want %q", got.Version, tt.wantVersion)
			}
		})
	}
}

// TestChangeRestarts: a change of a key restarts a workload that read it
// when recorded, and of no other key.
func TestChangeRestarts(t *testing.T) {
	ref := refs.Ref{Kind: refs.ConfigMap, Name: "x", Keys: []string{"a"}}
	in := plan.Input{Refs: []refs.Ref{ref}, Recorded: plan.Record{ref.ID(): &plan.Entry{Keys: map[string]string{"a": "1"}}},
		Configs: map[string]plan.Config{ref.ID(): {Present: true, Keys: map[string]string{"a": "1", "b": "2"}}}}
	for key, want := range map[string]bool{"a": true, "b": false, "c": false} {
		changed := Change(in, ref, []string{key})
		if got := Restarts(plan.Decide(changed), ref, []string{key}); got != want {
			t.Errorf("a change of %s restarts: %v, want %v", key, got, want)
		}
		if in.Configs[ref.ID()].Keys[key] != map[string]string{"a": "1", "b": "2"}[key] {
			t.Errorf("Change changed its input's keys")
		}
	}
}
