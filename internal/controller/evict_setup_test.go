package controller

// The set-up of the tests of restarts by eviction: a Deployment restarted
// by the evict strategy, a store holding it (client-go fakes, with the
// annotations watcher keeps), and a Reconciler whose API server is
// controller-runtime's fake client (with managedFields, stamped by its own
// clock), wrapped to count requests and to refuse what a test asks.

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/watcher-dev/watcher/internal/evict"
	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/hold"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/settings"
	"github.com/watcher-dev/watcher/internal/store"
	"github.com/watcher-dev/watcher/internal/workload"
)

var evHasher = hash.NewHasher([]byte("evict-tests-installation-key-012"))

const evNS = "tenant-a"

var evKey = workload.Key{Kind: "Deployment", Namespace: evNS, Name: "web"}

// evServer is the API server of a test: its objects, its requests counted
// by "verb kind", and the refusals it answers with.
type evServer struct {
	client.WithWatch
	// raw is the API server without the counting: the tests' own reads.
	raw   client.WithWatch
	mu    sync.Mutex
	calls map[string]int
	// refuse, when set, answers a request ("list PodList", "create
	// eviction") with an error, or nil to serve it.
	refuse func(call string) error
}

func (s *evServer) count(call string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls == nil {
		s.calls = map[string]int{}
	}
	s.calls[call]++
	if s.refuse != nil {
		return s.refuse(call)
	}
	return nil
}

// total is the number of requests served or refused so far.
func (s *evServer) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.calls {
		n += v
	}
	return n
}

// newEvServer serves objs, created by "kubectl".
func newEvServer(objs ...client.Object) *evServer {
	inner := fake.NewClientBuilder().WithReturnManagedFields().Build()
	for _, o := range objs { // created, not added, to have managedFields
		if err := inner.Create(context.Background(), o, client.FieldOwner("kubectl")); err != nil {
			panic(err)
		}
	}
	s := &evServer{raw: inner}
	s.WithWatch = interceptor.NewClient(inner, interceptor.Funcs{
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := s.count("get " + evType(obj)); err != nil {
				return err
			}
			return cl.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := s.count("list " + evType(list)); err != nil {
				return err
			}
			return cl.List(ctx, list, opts...)
		},
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if err := s.count("patch " + evType(obj)); err != nil {
				return err
			}
			return cl.Patch(ctx, obj, patch, opts...)
		},
		SubResourceCreate: func(ctx context.Context, cl client.Client, sub string, obj client.Object, subObj client.Object, opts ...client.SubResourceCreateOption) error {
			if err := s.count("create " + sub); err != nil {
				return err
			}
			return cl.SubResource(sub).Create(ctx, obj, subObj, opts...)
		},
	})
	return s
}

// evClock is a test's clock, moved by hand.
type evClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *evClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *evClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// evDeployment is Deployment tenant-a/web (replicas, strategy evict) using
// ConfigMap cfg, recorded, before any restart.
func evDeployment(replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": "web"}
	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: evNS, Name: "web", UID: "uid-web", Annotations: map[string]string{
			restart.StrategyAnnotation: "evict", plan.RecordAnnotation: evRecord().String(), plan.HashKeyAnnotation: evHasher.ID()}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "app", Image: "web:1", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
			}}}}},
	}
}

func evRecord() plan.Record {
	src := hash.Source{Kind: "ConfigMap", Namespace: evNS, Name: "cfg"}
	return plan.Record{"ConfigMap/cfg": &plan.Entry{All: true, Keys: evHasher.Of(src, map[string][]byte{"a": []byte("v1")}).Keys}}
}

func evConfigMap() *corev1.ConfigMap {
	return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: evNS, Name: "cfg"}, Data: map[string]string{"a": "v1"}}
}

// evReplicaSet is the Deployment's ReplicaSet.
func evReplicaSet() *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: evNS, Name: "web-6d4f", UID: "uid-rs", Labels: map[string]string{"app": "web"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "uid-web", Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}
}

// evPod is a pod of the ReplicaSet created at created.
func evPod(name string, created time.Time, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: evNS, Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"app": "web"},
			CreationTimestamp: metav1.NewTime(created),
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-6d4f", UID: "uid-rs", Controller: ptr.To(true)}}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

// evRestart writes, as watcher's restart does (its field manager, its
// signed state), the restart of the Deployment on the server at watcher's
// time at.
func evRestart(t *testing.T, srv *evServer, at time.Time) {
	t.Helper()
	state := guard.State{At: at, Generation: 2, Times: []time.Time{at},
		Sources: []guard.Source{{Object: object.Ref{Kind: "ConfigMap", Namespace: evNS, Name: "cfg"}, Sum: "0123456789abcdef"}}}
	dep := &appsv1.Deployment{}
	if err := srv.raw.Get(context.Background(), client.ObjectKey{Namespace: evNS, Name: "web"}, dep); err != nil {
		t.Fatal(err)
	}
	p := client.MergeFrom(dep.DeepCopy())
	dep.Annotations[guard.StateAnnotation] = state.Encode(string(dep.UID), evHasher.MAC)
	if err := srv.raw.Patch(context.Background(), dep, p, client.FieldOwner(evict.FieldManager)); err != nil {
		t.Fatal(err)
	}
}

// evReconciler starts a store holding what srv holds now and returns a
// Reconciler on srv, as a new process of watcher (or a new leader) with
// the clock now and the rollout timeout timeout. The store is stopped
// with ctx.
func evReconciler(t *testing.T, ctx context.Context, srv *evServer, now func() time.Time, timeout time.Duration) (*Reconciler, *events.FakeRecorder) {
	t.Helper()
	var stored []runtime.Object
	var deps appsv1.DeploymentList
	var cms corev1.ConfigMapList
	if err := srv.raw.List(ctx, &deps); err != nil {
		t.Fatal(err)
	}
	if err := srv.raw.List(ctx, &cms); err != nil {
		t.Fatal(err)
	}
	for i := range deps.Items {
		stored = append(stored, &deps.Items[i])
	}
	for i := range cms.Items {
		stored = append(stored, &cms.Items[i])
	}
	st, err := store.New(kubefake.NewClientset(stored...), store.Options{Hasher: evHasher,
		WorkloadAnnotations: []string{plan.RecordAnnotation, plan.HashKeyAnnotation, plan.VersionAnnotation, restart.StrategyAnnotation,
			guard.StateAnnotation, evict.DoneAnnotation}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = st.Start(ctx) }()
	if !toolscache.WaitForCacheSync(ctx.Done(), st.HasSynced) {
		t.Fatal("store did not sync")
	}
	rec := events.NewFakeRecorder(100)
	s := settings.Settings{Annotation: "require-restart", Discovery: plan.DiscoveryAll}
	r := New(st, srv, srv, rec, Config{Settings: s, Hasher: evHasher, Strategy: restart.Default,
		Guards: hold.Config{Sign: evHasher.MAC, RolloutTimeout: timeout, HoldOnFailure: true, Now: now}})
	return r, rec
}

// evType names the Go type of obj without its package ("Deployment",
// "PodList").
func evType(obj runtime.Object) string {
	t := reflect.TypeOf(obj)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}
