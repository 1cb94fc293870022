package restart_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/workload"
)

// cronJob is a kind whose pod template is nested deeper than spec.template.
var cronJob = workload.Kind{
	GVK:      batchv1.SchemeGroupVersion.WithKind("CronJob"),
	Template: []string{"spec", "jobTemplate", "spec", "template"},
}

// rollout is a custom resource: the API server has no strategic merge for it.
var rollout = workload.Kind{
	GVK:      schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Rollout"},
	Template: []string{"spec", "template"},
}

// stored is a workload as watcher's store holds it.
func stored(annotations map[string]string) client.Object {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Annotations: annotations}}
}

// TestPatch: the exact template part of the patch, for each strategy and
// kind, and where the env strategy falls back to the annotation.
func TestPatch(t *testing.T) {
	names := map[string]string{restart.ContainersAnnotation: "app,side;init,sidecar"}
	const (
		annotation = `{"metadata":{"annotations":{"watcher.dev/restarted-for":"id1"}}}`
		env        = `{"spec":{"containers":[{"env":[{"name":"WATCHER_CONFIG_HASH","value":"id1"}],"name":"app"},{"env":[{"name":"WATCHER_CONFIG_HASH","value":"id1"}],"name":"side"}],` +
			`"initContainers":[{"env":[{"name":"WATCHER_CONFIG_HASH","value":"id1"}],"name":"init"},{"env":[{"name":"WATCHER_CONFIG_HASH","value":"id1"}],"name":"sidecar"}]}}`
		envNoInit = `{"spec":{"containers":[{"env":[{"name":"WATCHER_CONFIG_HASH","value":"id1"}],"name":"app"}]}}`
		// restartedAt is kubectl's annotation, the time in UTC (the clock
		// below is in another zone), its second's fraction from the
		// restart ID "id1".
		restartedAt = `{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"2026-11-26T10:04:05.046762849Z"}}}`
	)
	now := func() time.Time { return time.Date(2026, 11, 26, 11, 4, 5, 999, time.FixedZone("CET", 3600)) }
	clock, evictAt := restart.RestartedAt{Now: now}, restart.Evict{Now: now}
	at := func(tmpl string, path ...string) string {
		for i := len(path) - 1; i >= 0; i-- {
			tmpl = `{"` + path[i] + `":` + tmpl + `}`
		}
		return tmpl
	}
	typed := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app"}},
	}}}}
	tests := []struct {
		name     string
		strategy restart.Strategy
		kind     workload.Kind
		obj      client.Object
		wantType types.PatchType
		want     string
	}{
		{"annotation Deployment", restart.Annotation{}, workload.Deployment, stored(names), types.MergePatchType, at(annotation, "spec", "template")},
		{"annotation StatefulSet", restart.Annotation{}, workload.StatefulSet, stored(names), types.MergePatchType, at(annotation, "spec", "template")},
		{"annotation DaemonSet", restart.Annotation{}, workload.DaemonSet, stored(names), types.MergePatchType, at(annotation, "spec", "template")},
		{"annotation nested template", restart.Annotation{}, cronJob, stored(names), types.MergePatchType, at(annotation, "spec", "jobTemplate", "spec", "template")},
		{"annotation custom resource", restart.Annotation{}, rollout, stored(names), types.MergePatchType, at(annotation, "spec", "template")},

		{"env Deployment", restart.Env{}, workload.Deployment, stored(names), types.StrategicMergePatchType, at(env, "spec", "template")},
		{"env StatefulSet", restart.Env{}, workload.StatefulSet, stored(names), types.StrategicMergePatchType, at(env, "spec", "template")},
		{"env DaemonSet", restart.Env{}, workload.DaemonSet, stored(names), types.StrategicMergePatchType, at(env, "spec", "template")},
		{"env nested template", restart.Env{}, cronJob, stored(names), types.StrategicMergePatchType, at(env, "spec", "jobTemplate", "spec", "template")},
		{"env no init containers", restart.Env{}, workload.Deployment, stored(map[string]string{restart.ContainersAnnotation: "app;"}), types.StrategicMergePatchType, at(envNoInit, "spec", "template")},
		{"env typed object: names from its template", restart.Env{}, workload.Deployment, typed, types.StrategicMergePatchType, at(envNoInit, "spec", "template")},
		{"env custom resource: no strategic merge, annotation", restart.Env{}, rollout, stored(names), types.MergePatchType, at(annotation, "spec", "template")},
		{"env names unknown: annotation", restart.Env{}, workload.Deployment, stored(nil), types.MergePatchType, at(annotation, "spec", "template")},
		{"restarted-at Deployment", clock, workload.Deployment, stored(names), types.MergePatchType, at(restartedAt, "spec", "template")},
		{"restarted-at nested template", clock, cronJob, stored(names), types.MergePatchType, at(restartedAt, "spec", "jobTemplate", "spec", "template")},
		{"restarted-at custom resource", clock, rollout, stored(nil), types.MergePatchType, at(restartedAt, "spec", "template")},
		{"evict Deployment: the template untouched", restart.Evict{}, workload.Deployment, stored(names), types.MergePatchType, `{"spec":{"template":{}}}`},
		{"evict StatefulSet: the template untouched", restart.Evict{}, workload.StatefulSet, stored(names), types.MergePatchType, `{"spec":{"template":{}}}`},
		{"evict DaemonSet: the template untouched", restart.Evict{}, workload.DaemonSet, stored(names), types.MergePatchType, `{"spec":{"template":{}}}`},
		{"evict Argo Rollout: Argo's restartAt", evictAt, rollout, stored(names), types.MergePatchType, `{"spec":{"restartAt":"2026-11-26T10:04:05Z"}}`},
		{"evict CronJob, no pods to evict: annotation", restart.Evict{}, cronJob, stored(names), types.MergePatchType, at(annotation, "spec", "jobTemplate", "spec", "template")},
		{"env names unreadable: annotation", restart.Env{}, workload.Deployment, stored(map[string]string{restart.ContainersAnnotation: ";init"}), types.MergePatchType, at(annotation, "spec", "template")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pt, patch := restart.Patch(tt.strategy, restart.Workload{Kind: tt.kind, Object: tt.obj, ID: "id1"})
			b, err := json.Marshal(patch)
			if err != nil {
				t.Fatal(err)
			}
			if pt != tt.wantType {
				t.Errorf("patch type %s, want %s", pt, tt.wantType)
			}
			if string(b) != tt.want {
				t.Errorf("\n got %s\nwant %s", b, tt.want)
			}
		})
	}
}

// TestEnvKeepsContainers applies the env strategy's patch the way the API
// server does (the same package merges): containers and env vars keep their
// order and content, the variable comes once, ahead of the container's own
// (a strategic merge puts list items the live object lacks first), and a
// second restart only changes its value, in place.
func TestEnvKeepsContainers(t *testing.T) {
	env := func(kv ...string) []corev1.EnvVar {
		var out []corev1.EnvVar
		for i := 0; i < len(kv); i += 2 {
			out = append(out, corev1.EnvVar{Name: kv[i], Value: kv[i+1]})
		}
		return out
	}
	d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Env: env("I", "1")}, {Name: "sidecar"}},
		Containers:     []corev1.Container{{Name: "b", Env: env("Z", "z", "A", "a")}, {Name: "a", Image: "a:1"}},
	}}}}
	restarted := func(d *appsv1.Deployment, id string) *appsv1.Deployment {
		t.Helper()
		_, patch := restart.Patch(restart.Env{}, restart.Workload{Kind: workload.Deployment, Object: d, ID: id})
		p, _ := json.Marshal(patch)
		orig, _ := json.Marshal(d)
		b, err := strategicpatch.StrategicMergePatch(orig, p, appsv1.Deployment{})
		if err != nil {
			t.Fatal(err)
		}
		var out appsv1.Deployment
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return &out
	}
	for _, id := range []string{"one", "two"} {
		got := restarted(d, id)
		want := d.DeepCopy()
		s := &want.Spec.Template.Spec
		s.InitContainers[0].Env = env(restart.EnvName, id, "I", "1")
		s.InitContainers[1].Env = env(restart.EnvName, id)
		s.Containers[0].Env = env(restart.EnvName, id, "Z", "z", "A", "a")
		s.Containers[1].Env = env(restart.EnvName, id)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("restart %s (-want +got):\n%s", id, diff)
		}
		d = got
	}
}

// TestFor: the annotation on a workload chooses its strategy; a value that
// names none is reported and the default used.
func TestFor(t *testing.T) {
	tests := []struct {
		annotations map[string]string
		want        string
		wantErr     bool
	}{
		{nil, "annotation", false},
		{map[string]string{restart.StrategyAnnotation: "env"}, "env", false},
		{map[string]string{restart.StrategyAnnotation: " Env "}, "env", false},
		{map[string]string{restart.StrategyAnnotation: "annotation"}, "annotation", false},
		{map[string]string{restart.StrategyAnnotation: "restarted-at"}, "restarted-at", false},
		{map[string]string{restart.StrategyAnnotation: "Restarted-At"}, "restarted-at", false},
		{map[string]string{restart.StrategyAnnotation: "evict"}, "evict", false},
		{map[string]string{restart.StrategyAnnotation: "restartAt"}, "annotation", true},
		{map[string]string{restart.StrategyAnnotation: ""}, "annotation", true},
	}
	for _, tt := range tests {
		got, err := restart.For(stored(tt.annotations), restart.Default)
		if got.Name() != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("%v: got %s, %v; want %s, error %v", tt.annotations, got.Name(), err, tt.want, tt.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), restart.StrategyAnnotation) {
			t.Errorf("error %q does not name the annotation", err)
		}
	}
	if got, _ := restart.For(stored(nil), nil); got.Name() != restart.Default.Name() {
		t.Errorf("with no default: got %s, want %s", got.Name(), restart.Default.Name())
	}
	// The default is the caller's.
	if got, err := restart.For(stored(map[string]string{restart.StrategyAnnotation: "bad"}), restart.Env{}); got.Name() != "env" || err == nil {
		t.Errorf("with default env: got %s, %v", got.Name(), err)
	}
	// Reloader's rollout-strategy: restart, on an Argo Rollout only, is
	// spec.restartAt (evict); watcher's own annotation wins.
	rollout := func(ann map[string]string) *metav1.PartialObjectMetadata {
		o := stored(ann).(*metav1.PartialObjectMetadata)
		o.APIVersion, o.Kind = workload.Rollout.APIVersion(), workload.Rollout.Name()
		return o
	}
	for _, tt := range []struct {
		obj  *metav1.PartialObjectMetadata
		want string
	}{
		{rollout(map[string]string{optin.RolloutStrategy: "restart"}), "evict"},
		{rollout(map[string]string{optin.RolloutStrategy: "rollout"}), "annotation"},
		{rollout(map[string]string{optin.RolloutStrategy: "restart", restart.StrategyAnnotation: "env"}), "env"},
		{stored(map[string]string{optin.RolloutStrategy: "restart"}).(*metav1.PartialObjectMetadata), "annotation"},
	} {
		if got, err := restart.For(tt.obj, restart.Default); err != nil || got.Name() != tt.want {
			t.Errorf("%s %v: got %s, %v; want %s", tt.obj.Kind, tt.obj.Annotations, got.Name(), err, tt.want)
		}
	}
}

// TestNames: --restart-strategy accepts exactly the strategies there are.
func TestNames(t *testing.T) {
	for _, n := range restart.Names() {
		if s, ok := restart.ByName(n); !ok || s.Name() != n {
			t.Errorf("ByName(%q) = %v, %v", n, s, ok)
		}
	}
	if restart.Default.Name() != options.Defaults().RestartStrategy {
		t.Errorf("default strategy %s, options default %s", restart.Default.Name(), options.Defaults().RestartStrategy)
	}
}

// TestContainersEncoding: names round-trip; malformed values are refused.
func TestContainersEncoding(t *testing.T) {
	for _, c := range []restart.Containers{
		{Containers: []string{"app"}},
		{Containers: []string{"app", "side"}, Init: []string{"init"}},
	} {
		got, ok := restart.DecodeContainers(restart.EncodeContainers(c))
		if !ok || !cmp.Equal(c, got) {
			t.Errorf("%v: decoded %v, %v", c, got, ok)
		}
	}
	for _, s := range []string{"", "app", ";init", "a;b;c"} {
		if c, ok := restart.DecodeContainers(s); ok {
			t.Errorf("DecodeContainers(%q) = %v, want refused", s, c)
		}
	}
}
