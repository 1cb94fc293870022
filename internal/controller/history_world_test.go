package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/watcher-dev/watcher/internal/evict"
	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/settings"
	"github.com/watcher-dev/watcher/internal/snapshot"
	"github.com/watcher-dev/watcher/internal/store"
)

// The history world: one namespace "ns", Deployments d0..dN reading
// ConfigMaps c0..cM through envFrom. The controller-runtime fake client
// (api) is the API server, the truth; a kubefake clientset mirrors it
// (resourceVersions kept) and feeds the store the Reconciler reads.

const hns = "ns"

var (
	gvrConfigMap  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	gvrDeployment = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

type hworld struct {
	t   testing.TB
	ctx context.Context
	api client.WithWatch
	cs  *kubefake.Clientset
	st  *store.Store
	// stop stops the store's informers.
	stop context.CancelFunc
	r    *Reconciler
	rec  *events.FakeRecorder
	// log is the history so far, printed on failure.
	log []string
	// observe, when set, is called after every sync of a settle.
	observe func()
	// clock is the snapshot.Maker's: it trusts its answer on the admission
	// policy for 10 s; each step of a history is a minute (tick).
	clock time.Time
}

// tick moves the world's clock on by a minute.
func (w *hworld) tick() { w.clock = w.clock.Add(time.Minute) }

func newWorld(t testing.TB, ctx context.Context, objs []client.Object) *hworld {
	w := &hworld{t: t, ctx: ctx, clock: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	b := fake.NewClientBuilder().WithScheme(scheme.Scheme)
	for _, o := range objs {
		b = b.WithObjects(o.DeepCopyObject().(client.Object))
	}
	w.api = b.WithObjects(
		&admissionv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "watcher-pins"}},
		&admissionv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "watcher-pins"}},
	).Build()
	w.restartWatcher()
	return w
}

// restartWatcher starts a fresh store (a fresh clientset, filled from the
// API server) and a fresh Reconciler: what a restart of watcher's pod is.
func (w *hworld) restartWatcher() {
	w.t.Helper()
	if w.stop != nil {
		w.stop()
	}
	sctx, stop := context.WithCancel(w.ctx)
	w.stop = stop
	w.cs = kubefake.NewClientset()
	w.mirror()
	st, err := store.New(w.cs, store.Options{Hasher: reviewHasher,
		WorkloadAnnotations: append([]string{"require-restart", plan.RecordAnnotation, plan.HashKeyAnnotation, plan.VersionAnnotation,
			restart.StrategyAnnotation, guard.PriorityAnnotation, guard.ReleaseAnnotation, guard.StateAnnotation, guard.PendingAnnotation, evict.DoneAnnotation}, optin.WorkloadKeys...),
		ConfigAnnotations: append([]string{"require-restart", guard.ReleaseAnnotation}, optin.ConfigKeys...)})
	if err != nil {
		w.t.Fatal(err)
	}
	w.st = st
	go func() { _ = st.Start(sctx) }()
	if !toolscache.WaitForCacheSync(sctx.Done(), st.HasSynced) {
		w.t.Fatal("store did not sync")
	}
	w.rec = events.NewFakeRecorder(10000)
	maker := &snapshot.Maker{Client: w.api, Fresh: w.api, Hasher: reviewHasher, Policy: "watcher-pins", Now: func() time.Time { return w.clock }}
	w.r = New(st, w.api, w.api, w.rec, Config{Settings: settings.Settings{Annotation: "require-restart", Discovery: plan.DiscoveryAll},
		Hasher: reviewHasher, Snapshots: maker})
	w.waitStore()
}

// mirror writes the API server's ConfigMaps and Deployments into the
// clientset the store watches, keeping their resourceVersions.
func (w *hworld) mirror() {
	w.t.Helper()
	tr := w.cs.Tracker()
	var cms corev1.ConfigMapList
	var deps appsv1.DeploymentList
	if err := w.api.List(w.ctx, &cms, client.InNamespace(hns)); err != nil {
		w.t.Fatal(err)
	}
	if err := w.api.List(w.ctx, &deps, client.InNamespace(hns)); err != nil {
		w.t.Fatal(err)
	}
	put := func(gvr schema.GroupVersionResource, o client.Object, rv string) {
		cur, err := tr.Get(gvr, hns, o.GetName())
		switch {
		case apierrors.IsNotFound(err):
			if err := tr.Create(gvr, o, hns); err != nil {
				w.t.Fatal(err)
			}
		case err != nil:
			w.t.Fatal(err)
		default:
			if cur.(client.Object).GetResourceVersion() != rv {
				if err := tr.Update(gvr, o, hns); err != nil {
					w.t.Fatal(err)
				}
			}
		}
	}
	seenCM := map[string]bool{}
	for i := range cms.Items {
		o := cms.Items[i].DeepCopy()
		o.TypeMeta = metav1.TypeMeta{}
		seenCM[o.Name] = true
		put(gvrConfigMap, o, o.ResourceVersion)
	}
	seenDep := map[string]bool{}
	for i := range deps.Items {
		o := deps.Items[i].DeepCopy()
		o.TypeMeta = metav1.TypeMeta{}
		seenDep[o.Name] = true
		put(gvrDeployment, o, o.ResourceVersion)
	}
	held, _ := w.cs.CoreV1().ConfigMaps(hns).List(w.ctx, metav1.ListOptions{})
	for _, o := range held.Items {
		if !seenCM[o.Name] {
			_ = tr.Delete(gvrConfigMap, hns, o.Name)
		}
	}
	heldD, _ := w.cs.AppsV1().Deployments(hns).List(w.ctx, metav1.ListOptions{})
	for _, o := range heldD.Items {
		if !seenDep[o.Name] {
			_ = tr.Delete(gvrDeployment, hns, o.Name)
		}
	}
}

// waitStore waits until the store holds every ConfigMap and Deployment at
// the API server's resourceVersion, and none the API server does not.
func (w *hworld) waitStore() {
	w.t.Helper()
	want := map[string]string{} // kind/name -> rv
	var cms corev1.ConfigMapList
	var deps appsv1.DeploymentList
	_ = w.api.List(w.ctx, &cms, client.InNamespace(hns))
	_ = w.api.List(w.ctx, &deps, client.InNamespace(hns))
	for _, o := range cms.Items {
		want["ConfigMap/"+o.Name] = o.ResourceVersion
	}
	for _, o := range deps.Items {
		want["Deployment/"+o.Name] = o.ResourceVersion
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok := true
		for k, rv := range want {
			kind, name, _ := strings.Cut(k, "/")
			o, err := w.st.Get(kind, hns, name)
			if err != nil || o == nil || o.ResourceVersion != rv {
				ok = false
				break
			}
		}
		if ok {
			for _, kind := range []string{"ConfigMap", "Deployment"} {
				for _, inf := range w.st.Informers(kind) {
					for _, key := range inf.GetIndexer().ListKeys() {
						_, name, _ := strings.Cut(key, "/")
						if _, there := want[kind+"/"+name]; !there {
							ok = false
						}
					}
				}
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("the store did not catch up with the API server")
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// sync mirrors the API server into the store's clientset and waits.
func (w *hworld) sync() {
	w.t.Helper()
	w.mirror()
	w.waitStore()
}

// versions is the resourceVersion of every object of the API server.
func (w *hworld) versions() map[string]string {
	out := map[string]string{}
	var cms corev1.ConfigMapList
	var deps appsv1.DeploymentList
	_ = w.api.List(w.ctx, &cms, client.InNamespace(hns))
	_ = w.api.List(w.ctx, &deps, client.InNamespace(hns))
	for _, o := range cms.Items {
		out["ConfigMap/"+o.Name] = o.ResourceVersion
	}
	for _, o := range deps.Items {
		out["Deployment/"+o.Name] = o.ResourceVersion
	}
	return out
}

// settle handles a Change of every ConfigMap in changed, then reconciles
// every Deployment, syncing the store after each call, until a round
// writes nothing (at most rounds rounds). It returns the errors of the
// last round.
func (w *hworld) settle(changed []string, deps []string) []error {
	w.t.Helper()
	w.sync()
	var errs []error
	for round := 0; round < 8; round++ {
		errs = nil
		before := w.versions()
		for _, c := range changed {
			if _, err := w.r.Reconcile(w.ctx, Change{object.Ref{Kind: "ConfigMap", Namespace: hns, Name: c}}); err != nil {
				errs = append(errs, fmt.Errorf("change %s: %w", c, err))
			}
			w.sync()
		}
		changed = nil
		for _, d := range deps {
			if _, err := w.r.Reconcile(w.ctx, Workload{object.Ref{Kind: "Deployment", Namespace: hns, Name: d}}); err != nil {
				errs = append(errs, fmt.Errorf("workload %s: %w", d, err))
			}
			w.sync()
			if w.observe != nil {
				w.observe()
			}
		}
		if maps.Equal(before, w.versions()) && len(errs) == 0 {
			return nil
		}
	}
	return errs
}

func (w *hworld) getDep(name string) *appsv1.Deployment {
	w.t.Helper()
	var d appsv1.Deployment
	if err := w.api.Get(w.ctx, client.ObjectKey{Namespace: hns, Name: name}, &d); err != nil {
		w.t.Fatal(err)
	}
	return &d
}

func (w *hworld) getCM(name string) *corev1.ConfigMap {
	var c corev1.ConfigMap
	if err := w.api.Get(w.ctx, client.ObjectKey{Namespace: hns, Name: name}, &c); err != nil {
		return nil
	}
	return &c
}

func (w *hworld) update(o client.Object) {
	w.t.Helper()
	if err := w.api.Update(w.ctx, o); err != nil {
		w.t.Fatal(err)
	}
}

func (w *hworld) policy(on bool) {
	w.t.Helper()
	objs := []client.Object{
		&admissionv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "watcher-pins"}},
		&admissionv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "watcher-pins"}},
	}
	for _, o := range objs {
		var err error
		if on {
			err = w.api.Create(w.ctx, o)
			if apierrors.IsAlreadyExists(err) {
				err = nil
			}
		} else {
			err = client.IgnoreNotFound(w.api.Delete(w.ctx, o))
		}
		if err != nil {
			w.t.Fatal(err)
		}
	}
}

func (w *hworld) logf(format string, args ...any) {
	w.log = append(w.log, fmt.Sprintf(format, args...))
}

// helpers shared by the simulation and its regressions.

func histDeployment(name string, reads []string, pinned bool) *appsv1.Deployment {
	var env []corev1.EnvFromSource
	for _, c := range reads {
		env = append(env, corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: c}}})
	}
	ann := map[string]string{}
	if pinned {
		ann["watcher.dev/pin"] = "true"
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: hns, Name: name, UID: types.UID("uid-" + name), Annotations: ann, Labels: map[string]string{"app": name}},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1", EnvFrom: env}}}}},
	}
}

func histConfigMap(name, value string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: hns, Name: name}, Data: map[string]string{"a": value}}
}

func sameTemplate(a, b corev1.PodTemplateSpec) bool { return apiequality.Semantic.DeepEqual(a, b) }

func sortedKeys[V any](m map[string]V) []string {
	k := slices.Collect(maps.Keys(m))
	sort.Strings(k)
	return k
}
