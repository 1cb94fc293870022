package plan_test

import (
	"fmt"
	"maps"
	"testing"

	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
)

// bigConfig returns the keys of an object with n keys, each hashed to h.
func bigConfig(n int, h string) map[string]string {
	keys := make(map[string]string, n)
	for i := range n {
		keys[fmt.Sprintf("FEATURE_FLAG_%05d", i)] = h
	}
	return keys
}

// TestRecordFitsItsBudget: a workload reading 12,000 keys through envFrom is
// recorded within RecordBudget (one digest for the big reference, the small
// one still listed), a change of one key still restarts it, and the same
// content decided again changes nothing.
func TestRecordFitsItsBudget(t *testing.T) {
	uses := []refs.Ref{cmAll("a"), cm("b", "k")}
	big := bigConfig(12000, "1111111111111111")
	in := plan.Input{Refs: uses, Configs: map[string]plan.Config{
		cmA: {Present: true, Keys: big}, cmB: present("k", "1"),
	}}
	p := plan.Decide(in)
	if p.Action != plan.Adopt {
		t.Fatalf("action %v, want adopt", p.Action)
	}
	if n := len(p.Record.String()); n > plan.RecordBudget {
		t.Fatalf("record of %d bytes, over the budget of %d", n, plan.RecordBudget)
	}
	if p.Record[cmA].Digest == "" || p.Record[cmA].Keys != nil || !p.Record[cmA].All {
		t.Errorf("big entry not summarized: all %v, %d keys", p.Record[cmA].All, len(p.Record[cmA].Keys))
	}
	if p.Record[cmB].Digest != "" || p.Record[cmB].Keys["k"] != "1" {
		t.Errorf("small entry summarized: %+v", p.Record[cmB])
	}

	// Through the annotation, as the controller does.
	rec, err := plan.ParseRecord(p.Record.String())
	if err != nil {
		t.Fatal(err)
	}
	in.Recorded = rec
	if p := plan.Decide(in); p.Action != plan.None {
		t.Fatalf("same content: action %v, want none", p.Action)
	}
	changed := maps.Clone(big)
	changed["FEATURE_FLAG_00042"] = "2222222222222222"
	in.Configs[cmA] = plan.Config{Present: true, Keys: changed}
	p = plan.Decide(in)
	if p.Action != plan.Restart || len(p.Changes) != 1 || p.Changes[0].Ref.ID() != cmA || p.Changes[0].Keys != nil {
		t.Fatalf("one key changed: plan %v with changes %+v, want a restart for %s with unlisted keys", p.Action, p.Changes, cmA)
	}
	if n := len(p.Record.String()); n > plan.RecordBudget {
		t.Fatalf("record of %d bytes after the change, over the budget", n)
	}
}
