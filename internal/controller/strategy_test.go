package controller

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/policy"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/workload"
)

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
	pt, patch := restart.PatchFor(obj, plan.Plan{Action: plan.Restart, Record: rec}, "k1", workload.Deployment, r.strategy(context.Background(), obj, s, err), "")
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
