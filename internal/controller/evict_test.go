package controller

import (
	"testing"
	"time"

	"github.com/watcher-dev/watcher/internal/workload"
)

// TestEvictionsMemory: a restart's evictions are done for its time only;
// a refusal is reported once until it changes or an eviction passes; a
// deleted workload is forgotten.
func TestEvictionsMemory(t *testing.T) {
	var e evictions
	key := workload.Key{Kind: "Deployment", Namespace: "ns", Name: "web"}
	t1, t2 := time.Unix(100, 0), time.Unix(200, 0)
	if e.isDone(key, t1) {
		t.Fatal("done before anything")
	}
	e.setDone(key, t1)
	if !e.isDone(key, t1) || e.isDone(key, t2) {
		t.Error("done: for its restart time only")
	}
	steps := []struct {
		msg  string
		want bool
	}{
		{"budget web needs 1", true},
		{"budget web needs 1", false}, // said once
		{"budget web needs 2", true},  // a new refusal
		{"", false},                   // an eviction passed
		{"budget web needs 2", true},  // refused again: said again
	}
	for i, s := range steps {
		if got := e.refused(key, s.msg); got != s.want {
			t.Errorf("step %d (%q): %v, want %v", i, s.msg, got, s.want)
		}
	}
	e.forget(key)
	if e.isDone(key, t1) || !e.refused(key, "budget web needs 2") {
		t.Error("a deleted workload is not forgotten")
	}
}
