package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/workload"
)

// TestPatchFor: the exact patches, one per action.
func TestPatchFor(t *testing.T) {
	rec := plan.Record{"ConfigMap/cfg": {All: true, Keys: map[string]string{"a": "1"}}}
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "7"}}
	tests := []struct {
		action plan.Action
		want   string
	}{
		{plan.Forget, `{"metadata":{"annotations":{"watcher.dev/config-hashes":null,"watcher.dev/config-version":null,"watcher.dev/hash-key":null},"resourceVersion":"7"}}`},
		{plan.Adopt, `{"metadata":{"annotations":{"watcher.dev/config-hashes":"{\"ConfigMap/cfg\":{\"all\":true,\"keys\":{\"a\":\"1\"}}}","watcher.dev/config-version":"42/` + rec.RestartID() + `","watcher.dev/hash-key":"k1"},"resourceVersion":"7"}}`},
		{plan.Restart, `{"metadata":{"annotations":{"watcher.dev/config-hashes":"{\"ConfigMap/cfg\":{\"all\":true,\"keys\":{\"a\":\"1\"}}}","watcher.dev/config-version":"42/` + rec.RestartID() + `","watcher.dev/hash-key":"k1"},"resourceVersion":"7"},"spec":{"template":{"metadata":{"annotations":{"watcher.dev/restarted-for":"` + rec.RestartID() + `"}}}}}`},
	}
	for _, tt := range tests {
		pt, patch := patchFor(obj, plan.Plan{Action: tt.action, Record: rec, Version: "42"}, "k1", workload.Deployment, restart.Annotation{}, "")
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
	_, patch := patchFor(obj, plan.Plan{Action: plan.Restart, Record: rec}, "k1", cronJob, restart.Annotation{}, "")
	got := string(patch)
	want := `{"metadata":{"annotations":{"watcher.dev/config-hashes":"{\"ConfigMap/cfg\":null}","watcher.dev/config-version":null,"watcher.dev/hash-key":"k1"},"resourceVersion":"7"},"spec":{"jobTemplate":{"spec":{"template":{"metadata":{"annotations":{"watcher.dev/restarted-for":"` + rec.RestartID() + `"}}}}}}}`
	if got != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
}
