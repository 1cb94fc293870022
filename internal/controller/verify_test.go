package controller

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/resolve"
	"github.com/watcher-dev/watcher/internal/settings"
	"github.com/watcher-dev/watcher/internal/store"
	"github.com/watcher-dev/watcher/internal/workload"
)

// TestVerifyRestarts: a replica whose store still holds an older ConfigMap
// than the one another replica (or the previous leader) recorded on the
// workload must not roll the workload back to it: the restart is verified
// against the API server. Deciding from the store alone would restart.
func TestVerifyRestarts(t *testing.T) {
	hasher := hash.NewHasher([]byte("0123456789abcdef0123"))
	cm := func(v string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}, Data: map[string]string{"a": v}}
	}
	src := hash.Source{Kind: "ConfigMap", Namespace: "ns", Name: "cfg"}
	newest := plan.Record{"ConfigMap/cfg": &plan.Entry{All: true, Keys: hasher.Of(src, map[string][]byte{"a": []byte("v3")}).Keys}}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", ResourceVersion: "7", Annotations: map[string]string{
			plan.RecordAnnotation: newest.String(), plan.HashKeyAnnotation: hasher.ID(),
		}},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
		}}}}},
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := store.New(kubefake.NewClientset(dep.DeepCopy(), cm("v2")), store.Options{Hasher: hasher, WorkloadAnnotations: []string{plan.RecordAnnotation, plan.HashKeyAnnotation}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = st.Start(ctx) }()
	if !toolscache.WaitForCacheSync(ctx.Done(), st.HasSynced) {
		t.Fatal("store did not sync")
	}
	apiServer := fake.NewClientBuilder().WithObjects(dep.DeepCopy(), cm("v3")).Build()
	r := &Reconciler{Store: st, Client: apiServer, Fresh: apiServer, Recorder: events.NewFakeRecorder(10),
		Config: Config{Settings: settings.Settings{Annotation: "require-restart"}, Hasher: hasher}, resolve: resolve.New(resolve.Options{})}
	key := workload.Key{Kind: "Deployment", Namespace: "ns", Name: "web"}

	// The store alone says restart: the scenario is real.
	cached, _ := st.Get("Deployment", "ns", "web")
	in, err := r.gather(ctx, cached, true)
	if err != nil {
		t.Fatal(err)
	}
	if p := plan.Decide(in); p.Action != plan.Restart {
		t.Fatalf("from the store: %v, want restart", p.Action)
	}

	out, err := r.reconcileWorkload(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var got appsv1.Deployment
	if err := apiServer.Get(context.Background(), client.ObjectKeyFromObject(dep), &got); err != nil {
		t.Fatal(err)
	}
	if _, restarted := got.Spec.Template.Annotations[plan.RestartAnnotation]; restarted || out.Action == plan.Restart {
		t.Errorf("restarted to the store's older content (plan %v)", out.Action)
	}
}
