package controller

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/settings"
	"github.com/watcher-dev/watcher/internal/store"
	"github.com/watcher-dev/watcher/internal/workload"
)

// verifyCase is a workload web using ConfigMap cfg, its record made from
// cfg's content recorded at version recordedAt, the store holding stored
// at resourceVersion "5" and the API server server.
type verifyCase struct {
	recorded, stored, server string
	recordedAt               string // "": no version recorded
	// conflicts is how many patches of the workload the API server
	// refuses with a conflict first.
	conflicts int
}

// setUp starts a store and a reconciler for c; gets counts the reads of
// ConfigMaps from the API server.
func (c verifyCase) setUp(t *testing.T, ctx context.Context) (r *Reconciler, st *store.Store, apiServer client.Client, gets *atomic.Int32) {
	t.Helper()
	hasher := hash.NewHasher([]byte("0123456789abcdef0123"))
	cm := func(v string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg", ResourceVersion: "5"}, Data: map[string]string{"a": v}}
	}
	src := hash.Source{Kind: "ConfigMap", Namespace: "ns", Name: "cfg"}
	recorded := plan.Record{"ConfigMap/cfg": &plan.Entry{All: true, Keys: hasher.Of(src, map[string][]byte{"a": []byte(c.recorded)}).Keys}}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", ResourceVersion: "7", Annotations: map[string]string{
			plan.RecordAnnotation: recorded.String(), plan.HashKeyAnnotation: hasher.ID(),
		}},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
		}}}}},
	}
	if c.recordedAt != "" {
		dep.Annotations[plan.VersionAnnotation] = plan.FormatVersion(recorded, c.recordedAt).(string)
	}
	st, err := store.New(kubefake.NewClientset(dep.DeepCopy(), cm(c.stored)), store.Options{Hasher: hasher,
		WorkloadAnnotations: []string{plan.RecordAnnotation, plan.HashKeyAnnotation, plan.VersionAnnotation}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = st.Start(ctx) }()
	if !toolscache.WaitForCacheSync(ctx.Done(), st.HasSynced) {
		t.Fatal("store did not sync")
	}
	gets = &atomic.Int32{}
	conflicts := c.conflicts
	apiServer = interceptor.NewClient(fake.NewClientBuilder().WithObjects(dep.DeepCopy(), cm(c.server)).Build(), interceptor.Funcs{
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if obj.GetName() == "web" && conflicts > 0 {
				conflicts--
				return apierrors.NewConflict(appsv1.Resource("deployments"), obj.GetName(), errors.New("the object has been modified"))
			}
			return cl.Patch(ctx, obj, patch, opts...)
		},
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.ConfigMap); ok {
				gets.Add(1)
			}
			return cl.Get(ctx, key, obj, opts...)
		},
	})
	r = New(st, apiServer, apiServer, events.NewFakeRecorder(10),
		Config{Settings: settings.Settings{Annotation: "require-restart"}, Hasher: hasher})
	return r, st, apiServer, gets
}

// TestVerifyRestarts: a replica whose store still holds an older ConfigMap
// than the one another replica (or the previous leader) recorded on the
// workload must not roll the workload back to it: the restart is verified
// against the API server. Deciding from the store alone would restart.
func TestVerifyRestarts(t *testing.T) {
	for name, recordedAt := range map[string]string{"no version recorded": "", "the record newer than the store": "9"} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r, st, apiServer, gets := verifyCase{recorded: "v3", stored: "v2", server: "v3", recordedAt: recordedAt}.setUp(t, ctx)
			testVerifyRestarts(t, ctx, r, st, apiServer)
			if gets.Load() == 0 {
				t.Error("the ConfigMap was not read from the API server")
			}
		})
	}
}

// TestVerifyNotNeeded: a change the store saw after the record was made
// (the record's version older than the store's object) restarts with the
// patch alone, the ConfigMap not read again.
func TestVerifyNotNeeded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, _, apiServer, gets := verifyCase{recorded: "v1", stored: "v2", server: "v2", recordedAt: "3"}.setUp(t, ctx)
	out, err := r.reconcileWorkload(ctx, workload.Key{Kind: "Deployment", Namespace: "ns", Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	var got appsv1.Deployment
	if err := apiServer.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "web"}, &got); err != nil {
		t.Fatal(err)
	}
	if _, restarted := got.Spec.Template.Annotations[plan.RestartAnnotation]; !restarted || out.Action != plan.Restart {
		t.Fatalf("not restarted (plan %v)", out.Action)
	}
	if n := gets.Load(); n != 0 {
		t.Errorf("the ConfigMap was read %d times from the API server, want none", n)
	}
	if v := plan.ParseVersion(got.Annotations[plan.VersionAnnotation], out.Record); v != "5" {
		t.Errorf("version recorded %q (annotation %q), want the store's 5", v, got.Annotations[plan.VersionAnnotation])
	}
}

// TestConflictIsNoFailedReload: a restart patch refused with a conflict
// is decided again and made; Reloader's reloader_reload_executed_total
// counts one success and no failure (a conflict is no failed reload).
func TestConflictIsNoFailedReload(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, _, _, _ := verifyCase{recorded: "v1", stored: "v2", server: "v2", recordedAt: "3", conflicts: 1}.setUp(t, ctx)
	ok, failed := testutil.ToFloat64(metrics.ReloadExecuted.WithLabelValues("true")), testutil.ToFloat64(metrics.ReloadExecuted.WithLabelValues("false"))
	out, err := r.reconcileWorkload(ctx, workload.Key{Kind: "Deployment", Namespace: "ns", Name: "web"})
	if err != nil || out.Action != plan.Restart {
		t.Fatalf("plan %v, error %v: want a restart", out.Action, err)
	}
	if d := testutil.ToFloat64(metrics.ReloadExecuted.WithLabelValues("false")) - failed; d != 0 {
		t.Errorf("failed reloads counted: %v, want none", d)
	}
	if d := testutil.ToFloat64(metrics.ReloadExecuted.WithLabelValues("true")) - ok; d != 1 {
		t.Errorf("reloads counted: %v, want 1", d)
	}
}

func testVerifyRestarts(t *testing.T, ctx context.Context, r *Reconciler, st *store.Store, apiServer client.Client) {
	t.Helper()
	key := workload.Key{Kind: "Deployment", Namespace: "ns", Name: "web"}

	// The store alone says restart: the scenario is real.
	cached, _ := st.Get("Deployment", "ns", "web")
	w, err := r.gather(ctx, key, cached)
	if err != nil {
		t.Fatal(err)
	}
	if p := plan.Decide(w.in); p.Action != plan.Restart {
		t.Fatalf("from the store: %v, want restart", p.Action)
	}

	out, err := r.reconcileWorkload(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var got appsv1.Deployment
	if err := apiServer.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "web"}, &got); err != nil {
		t.Fatal(err)
	}
	if _, restarted := got.Spec.Template.Annotations[plan.RestartAnnotation]; restarted || out.Action == plan.Restart {
		t.Errorf("restarted to the store's older content (plan %v)", out.Action)
	}
}
