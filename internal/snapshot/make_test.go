package snapshot_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/snapshot"
)

// TestMakeReusesOverBudget: the snapshot of a content that exists is
// reused whatever the budget (it adds no byte); only a new one is
// refused.
func TestMakeReusesOverBudget(t *testing.T) {
	m, _, w := scene(t)
	stored := int64(0)
	m.Budget, m.Stored = 1500, func(string) int64 { return stored }
	first, err := m.Make(ctx, w, deployment, []pin.Source{app})
	if err != nil || first.Pins[app] == "" {
		t.Fatalf("first = %+v, %v", first, err)
	}
	stored = 1500
	res, err := m.Make(ctx, workload("api", "w2"), deployment, []pin.Source{app, db})
	if err != nil {
		t.Fatal(err)
	}
	if res.Pins[app] != first.Pins[app] || len(res.OverBudget) != 1 || res.OverBudget[0] != db {
		t.Errorf("result = %+v, want app reused and db (new) over the budget", res)
	}
}

// TestMakeNeverSnapshotsASnapshot: a source that is itself a snapshot
// (labelled as one, or named as one with pin.SnapshotOf) floats, and is
// never copied; a ConfigMap merely named like one is pinned.
func TestMakeNeverSnapshotsASnapshot(t *testing.T) {
	shaped := "app-pin-0123456789abcdef0123"
	for _, tc := range []struct {
		name   string
		obj    *corev1.ConfigMap
		floats bool
	}{
		{"watcher's snapshot", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: shaped,
			Labels: map[string]string{pin.SnapshotLabel: "true"}, Annotations: map[string]string{pin.SnapshotOf: "configmap/app"}}}, true},
		{"labelled a snapshot, any value", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other",
			Labels: map[string]string{pin.SnapshotLabel: "no"}}}, true},
		{"named as one, with its source", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: shaped,
			Annotations: map[string]string{pin.SnapshotOf: "configmap/app"}}}, true},
		{"only named as one", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: shaped}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.obj.Namespace, tc.obj.Data = "ns", map[string]string{"k": "v"}
			m, c, w := scene(t, tc.obj)
			src := pin.Source{Kind: pin.ConfigMap, Name: tc.obj.Name}
			res, err := m.Make(ctx, w, deployment, []pin.Source{src})
			if err != nil {
				t.Fatal(err)
			}
			if floats := res.Floating[src] == "a snapshot"; floats != tc.floats || (tc.floats && len(res.Made) != 0) {
				t.Errorf("result = %+v, want floating %v", res, tc.floats)
			}
			var all corev1.ConfigMapList
			_ = c.List(ctx, &all, client.InNamespace("ns"))
			if want := 2 + len(res.Made); len(all.Items) != want {
				t.Errorf("%d ConfigMaps, want %d", len(all.Items), want)
			}
		})
	}
}

// TestMakeRefused: what the API server refuses (a quota, an admission
// policy) is Refused, not Taken; nothing is made.
func TestMakeRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"quota", apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "app-pin-x", errQuota{})},
		{"admission", apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "app-pin-x", nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _, w := scene(t)
			m.Client = interceptor.NewClient(m.Client.(client.WithWatch), interceptor.Funcs{
				Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error { return tc.err },
			})
			res, err := m.Make(ctx, w, deployment, []pin.Source{app})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Refused) != 1 || res.Refused[0] != app || len(res.Taken)+len(res.Pins)+len(res.Made) != 0 {
				t.Errorf("result = %+v, want app refused", res)
			}
		})
	}
}

type errQuota struct{}

func (errQuota) Error() string { return "exceeded quota: q, requested: count/configmaps=1" }

// TestMakeSignsBytes: a snapshot's size is signed with the installation's
// key, so that the budget counts it; the signature is of that snapshot
// only.
func TestMakeSignsBytes(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"}, Data: map[string][]byte{"password": []byte("p1")}}).Build()
	h := hash.NewHasher([]byte("0123456789abcdef0123456789abcdef"))
	m := &snapshot.Maker{Client: c, Fresh: c, Hasher: h, Sign: h.MAC}
	res, err := m.Make(ctx, workload("web", "w1"), deployment, []pin.Source{db})
	if err != nil || res.Pins[db] == "" {
		t.Fatalf("result = %+v, %v", res, err)
	}
	var s corev1.Secret
	_ = c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: res.Pins[db]}, &s)
	a := s.Annotations
	if got := pin.SignedBytes("ns", s.Name, a[pin.Bytes], a[pin.BytesSignature], h.MAC); got != 10 {
		t.Errorf("signed size = %d (%q, %q), want 10", got, a[pin.Bytes], a[pin.BytesSignature])
	}
	if got := pin.SignedBytes("ns", "other", a[pin.Bytes], a[pin.BytesSignature], h.MAC); got != 0 {
		t.Errorf("the signature verifies for another name: %d", got)
	}
}
