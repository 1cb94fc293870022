package snapshot_test

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/snapshot"
)

var ctx = context.Background()

// scene is a namespace with a ConfigMap app, a Secret db, a token Secret
// and a Deployment web, and a Maker over a fake client.
func scene(t *testing.T, objs ...client.Object) (*snapshot.Maker, client.Client, *metav1.PartialObjectMetadata) {
	t.Helper()
	base := []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", Labels: map[string]string{"team": "a"}}, Data: map[string]string{"k": strings.Repeat("v", 1000)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"}, Data: map[string][]byte{"password": []byte("p1")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "token"}, Type: corev1.SecretTypeServiceAccountToken, Data: map[string][]byte{"token": []byte("t")}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(append(base, objs...)...).Build()
	m := &snapshot.Maker{Client: c, Fresh: c, Hasher: hash.NewHasher([]byte("0123456789abcdef0123456789abcdef")), Policy: "watcher-pins"}
	return m, c, workload("web", "w1")
}

// workload is a Deployment as the store holds it.
func workload(name string, uid types.UID) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: deployment, ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid}}
}

var deployment = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}

var (
	app   = pin.Source{Kind: pin.ConfigMap, Name: "app"}
	db    = pin.Source{Kind: pin.Secret, Name: "db"}
	token = pin.Source{Kind: pin.Secret, Name: "token"}
	gone  = pin.Source{Kind: pin.ConfigMap, Name: "gone"}
)

// TestMake: each source the pods read is copied into an immutable,
// content-named snapshot owned by the workload, with none of the source's
// labels; a token floats; a source gone is left out; a second restart of
// the same content reuses the snapshot.
func TestMake(t *testing.T) {
	m, c, w := scene(t)
	res, err := m.Make(ctx, w, deployment, []pin.Source{app, db, token, gone})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Pins) != 2 || len(res.Made) != 2 || res.Floating[token] == "" || len(res.Taken)+len(res.OverBudget) != 0 {
		t.Fatalf("result = %+v", res)
	}
	var snap corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: res.Pins[app]}, &snap); err != nil {
		t.Fatal(err)
	}
	if !ptr.Deref(snap.Immutable, false) || snap.Labels["team"] != "" || snap.Annotations[pin.SnapshotOf] != "configmap/app" ||
		len(snap.OwnerReferences) != 1 || snap.OwnerReferences[0].UID != "w1" || !strings.HasPrefix(snap.Name, "app-pin-") {
		t.Errorf("snapshot = %+v", snap.ObjectMeta)
	}
	again, err := m.Make(ctx, w, deployment, []pin.Source{app})
	if err != nil {
		t.Fatal(err)
	}
	if again.Pins[app] != res.Pins[app] || len(again.Made) != 0 {
		t.Errorf("second make = %+v, want the same snapshot reused", again)
	}
	if _, err := m.Make(ctx, workload("api", "w2"), deployment, []pin.Source{app}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: res.Pins[app]}, &snap); err != nil {
		t.Fatal(err)
	}
	if len(snap.OwnerReferences) != 2 {
		t.Errorf("owners = %v, want both workloads", snap.OwnerReferences)
	}
}

// TestMakeTaken: a snapshot's name held by an object that is not that
// snapshot is never touched; the source is left live.
func TestMakeTaken(t *testing.T) {
	m, c, w := scene(t)
	var cm corev1.ConfigMap
	_ = c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "app"}, &cm)
	d, _ := m.Hasher.OfObject(&cm)
	squat := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: pin.SnapshotName("app", d.Sum)}, Data: map[string]string{"mine": "yes"}}
	if err := c.Create(ctx, squat); err != nil {
		t.Fatal(err)
	}
	res, err := m.Make(ctx, w, deployment, []pin.Source{app})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Pins) != 0 || len(res.Taken) != 1 {
		t.Fatalf("result = %+v, want app taken", res)
	}
	var after corev1.ConfigMap
	_ = c.Get(ctx, client.ObjectKeyFromObject(squat), &after)
	if after.Data["mine"] != "yes" || len(after.OwnerReferences) != 0 {
		t.Errorf("the squatter was touched: %+v", after)
	}
}

// TestMakeBudget: a snapshot that would take the namespace's snapshots
// over its budget is not made: the source is left live; once the
// namespace holds less (snapshots collected), it is made.
func TestMakeBudget(t *testing.T) {
	m, c, w := scene(t)
	stored := int64(0)
	m.Budget, m.Stored = 1500, func(ns string) int64 { return stored }
	res, err := m.Make(ctx, w, deployment, []pin.Source{db})
	if err != nil || res.Pins[db] == "" {
		t.Fatalf("result = %+v, %v", res, err)
	}
	var sec corev1.Secret
	_ = c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: res.Pins[db]}, &sec)
	if sec.Annotations[pin.Bytes] != "10" { // "password" and "p1"
		t.Errorf("%s = %q, want 10", pin.Bytes, sec.Annotations[pin.Bytes])
	}
	stored = 600
	if res, err = m.Make(ctx, w, deployment, []pin.Source{app}); err != nil || len(res.OverBudget) != 1 || res.OverBudget[0] != app {
		t.Fatalf("result = %+v, %v: want app (1 KB) over the budget", res, err)
	}
	stored = 0
	if res, err = m.Make(ctx, w, deployment, []pin.Source{app}); err != nil || res.Pins[app] == "" {
		t.Fatalf("result = %+v, %v: want app pinned", res, err)
	}
}

// TestInstalled: pinning is off while the policy or its binding is
// missing; the answer is trusted for 10 s.
func TestInstalled(t *testing.T) {
	m, c, _ := scene(t)
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	m.Now = func() time.Time { return now }
	if err := m.Installed(ctx); err == nil || !strings.Contains(err.Error(), "watcher-pins") {
		t.Fatalf("Installed = %v, want an error naming the policy", err)
	}
	_ = c.Create(ctx, &admissionv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "watcher-pins"}})
	_ = c.Create(ctx, &admissionv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "watcher-pins"}})
	if err := m.Installed(ctx); err == nil {
		t.Fatal("looked again within 10 s")
	}
	now = now.Add(11 * time.Second)
	if err := m.Installed(ctx); err != nil {
		t.Fatalf("Installed = %v, want nil", err)
	}
}
