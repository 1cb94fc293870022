package controller

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/policy"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/workload"
)

// cronJob keeps its pod template deeper than spec.template.
var cronJob = workload.Kind{
	GVK:      batchv1.SchemeGroupVersion.WithKind("CronJob"),
	Template: []string{"spec", "jobTemplate", "spec", "template"},
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
			pt, patch := patchFor(obj, plan.Plan{Action: tt.action, Record: rec}, "k1", tt.kind, tt.strategy, "")
			if string(patch) != tt.want {
				t.Errorf("\n got %s\nwant %s", patch, tt.want)
			}
			if pt != tt.wantType {
				t.Errorf("patch type %s, want %s", pt, tt.wantType)
			}
		})
	}
}

// TestInvalidStrategyIsReported: a workload annotated with a strategy that
// does not exist is restarted with the default strategy (here env), and the
// value is reported as a Warning Event and counted.
func TestInvalidStrategyIsReported(t *testing.T) {
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Annotations: map[string]string{restart.StrategyAnnotation: "restartAt"}},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Env: []corev1.EnvVar{{Name: "A", Value: "a"}},
		}}}}},
	}
	apiServer := fake.NewClientBuilder().WithObjects(dep.DeepCopy()).Build()
	recorder := events.NewFakeRecorder(10)
	r := New(nil, apiServer, nil, recorder, Config{Strategy: restart.Env{}})
	errors := metrics.Errors.WithLabelValues("annotation")
	before := testutil.ToFloat64(errors)

	obj := dep.DeepCopy()
	if err := apiServer.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	rec := plan.Record{"ConfigMap/cfg": nil}
	s, err := r.strategyOf(obj, policy.Applied{})
	pt, patch := patchFor(obj, plan.Plan{Action: plan.Restart, Record: rec}, "k1", workload.Deployment, r.strategy(context.Background(), obj, s, err), "")
	if err := apiServer.Patch(context.Background(), obj, client.RawPatch(pt, patch)); err != nil {
		t.Fatal(err)
	}

	var got appsv1.Deployment
	if err := apiServer.Get(context.Background(), client.ObjectKeyFromObject(dep), &got); err != nil {
		t.Fatal(err)
	}
	want := []corev1.EnvVar{{Name: restart.EnvName, Value: rec.RestartID()}, {Name: "A", Value: "a"}}
	if env := got.Spec.Template.Spec.Containers[0].Env; len(env) != 2 || env[0] != want[0] || env[1] != want[1] {
		t.Errorf("env after the restart: %v, want %v", env, want)
	}
	if _, ok := got.Spec.Template.Annotations[plan.RestartAnnotation]; ok {
		t.Error("restarted with the annotation, not the default strategy env")
	}
	if n := testutil.ToFloat64(errors) - before; n != 1 {
		t.Errorf("watcher_errors_total{operation=annotation} moved by %v, want 1", n)
	}
	var warned bool
	for len(recorder.Events) > 0 {
		e := <-recorder.Events
		warned = warned || (strings.HasPrefix(e, "Warning InvalidAnnotation") && strings.Contains(e, restart.StrategyAnnotation))
	}
	if !warned {
		t.Error("no Warning Event InvalidAnnotation naming the annotation")
	}
}
