package restart_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
		pt, patch := restart.PatchFor(obj, plan.Plan{Action: tt.action, Record: rec, Version: "42"}, "k1", workload.Deployment, restart.Annotation{}, "")
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
	_, patch := restart.PatchFor(obj, plan.Plan{Action: plan.Restart, Record: rec}, "k1", cronJob, restart.Annotation{}, "")
	got := string(patch)
	want := `{"metadata":{"annotations":{"watcher.dev/config-hashes":"{\"ConfigMap/cfg\":null}","watcher.dev/config-version":null,"watcher.dev/hash-key":"k1"},"resourceVersion":"7"},"spec":{"jobTemplate":{"spec":{"template":{"metadata":{"annotations":{"watcher.dev/restarted-for":"` + rec.RestartID() + `"}}}}}}}`
	if got != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
}

// TestPatchForStrategies: the exact patch of a restart for each strategy
// and kind, record and precondition included, all in one patch; and the
// strategy changes nothing but restarts.
func TestPatchForStrategies(t *testing.T) {
	rec := plan.Record{"ConfigMap/cfg": nil}
	id := rec.RestartID()
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "7", Annotations: map[string]string{
		restart.ContainersAnnotation: "app,side;init",
	}}}
	const meta = `"metadata":{"annotations":{"watcher.dev/config-hashes":"{\"ConfigMap/cfg\":null}","watcher.dev/config-version":null,"watcher.dev/hash-key":"k1"},"resourceVersion":"7"}`
	annotation := `{"metadata":{"annotations":{"watcher.dev/restarted-for":"` + id + `"}}}`
	env := `{"spec":{"containers":[{"env":[{"name":"WATCHER_CONFIG_HASH","value":"` + id + `"}],"name":"app"},{"env":[{"name":"WATCHER_CONFIG_HASH","value":"` + id + `"}],"name":"side"}],` +
		`"initContainers":[{"env":[{"name":"WATCHER_CONFIG_HASH","value":"` + id + `"}],"name":"init"}]}}`
	template := `"spec":{"template":`
	nested := `"spec":{"jobTemplate":{"spec":{"template":`
	custom := workload.Kind{GVK: schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Rollout"}, Template: []string{"spec", "template"}}
	tests := []struct {
		name     string
		action   plan.Action
		strategy restart.Strategy
		kind     workload.Kind
		wantType types.PatchType
		want     string
	}{
		{"annotation Deployment", plan.Restart, restart.Annotation{}, workload.Deployment, types.MergePatchType, `{` + meta + `,` + template + annotation + `}}`},
		{"annotation StatefulSet", plan.Restart, restart.Annotation{}, workload.StatefulSet, types.MergePatchType, `{` + meta + `,` + template + annotation + `}}`},
		{"annotation DaemonSet", plan.Restart, restart.Annotation{}, workload.DaemonSet, types.MergePatchType, `{` + meta + `,` + template + annotation + `}}`},
		{"annotation CronJob", plan.Restart, restart.Annotation{}, cronJob, types.MergePatchType, `{` + meta + `,` + nested + annotation + `}}}}`},
		{"env Deployment", plan.Restart, restart.Env{}, workload.Deployment, types.StrategicMergePatchType, `{` + meta + `,` + template + env + `}}`},
		{"env StatefulSet", plan.Restart, restart.Env{}, workload.StatefulSet, types.StrategicMergePatchType, `{` + meta + `,` + template + env + `}}`},
		{"env DaemonSet", plan.Restart, restart.Env{}, workload.DaemonSet, types.StrategicMergePatchType, `{` + meta + `,` + template + env + `}}`},
		{"env CronJob", plan.Restart, restart.Env{}, cronJob, types.StrategicMergePatchType, `{` + meta + `,` + nested + env + `}}}}`},
		{"env custom resource: annotation", plan.Restart, restart.Env{}, custom, types.MergePatchType, `{` + meta + `,` + template + annotation + `}}`},
		{"env adoption: no template", plan.Adopt, restart.Env{}, workload.Deployment, types.MergePatchType, `{` + meta + `}`},
		{"env refresh: no template", plan.Refresh, restart.Env{}, workload.Deployment, types.MergePatchType, `{` + meta + `}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pt, patch := restart.PatchFor(obj, plan.Plan{Action: tt.action, Record: rec}, "k1", tt.kind, tt.strategy, "")
			if string(patch) != tt.want {
				t.Errorf("\n got %s\nwant %s", patch, tt.want)
			}
			if pt != tt.wantType {
				t.Errorf("patch type %s, want %s", pt, tt.wantType)
			}
		})
	}
}
