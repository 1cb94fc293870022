package evict_test

import (
	"context"
	"errors"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/watcher-dev/watcher/internal/evict"
	"github.com/watcher-dev/watcher/internal/hash"
)

const stateKey = "watcher.dev/restart-state"

// TestServerTime: the API server's time of the last restart by eviction
// is the time of evict.FieldManager's entry, only while it owns the
// restart's state.
func TestServerTime(t *testing.T) {
	t1, t2 := metav1.NewTime(time.Unix(1000, 0)), metav1.NewTime(time.Unix(2000, 0))
	fields := func(keys ...string) *metav1.FieldsV1 {
		s := `{"f:metadata":{"f:annotations":{`
		for i, k := range keys {
			if i > 0 {
				s += ","
			}
			s += `"f:` + k + `":{}`
		}
		return metav1.NewFieldsV1(s + `}}}`)
	}
	entry := func(manager string, at metav1.Time, f *metav1.FieldsV1) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Time: &at, FieldsType: "FieldsV1", FieldsV1: f}
	}
	tests := []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    time.Time
		ok      bool
	}{
		{"none", nil, time.Time{}, false},
		{"the restart's", []metav1.ManagedFieldsEntry{entry("kubectl", t1, fields("a")), entry(evict.FieldManager, t2, fields(stateKey, "b"))}, t2.Time, true},
		{"another manager's state", []metav1.ManagedFieldsEntry{entry("watcher", t2, fields(stateKey)), entry(evict.FieldManager, t1, fields("b"))}, time.Time{}, false},
		{"a status entry", []metav1.ManagedFieldsEntry{func() metav1.ManagedFieldsEntry {
			e := entry(evict.FieldManager, t2, fields(stateKey))
			e.Subresource = "status"
			return e
		}()}, time.Time{}, false},
	}
	for _, tt := range tests {
		obj := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{ManagedFields: tt.entries}}
		got, ok := evict.ServerTime(obj, stateKey)
		if ok != tt.ok || !got.Equal(tt.want) {
			t.Errorf("%s: %v, %v; want %v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

// TestDoneMark: the mark says done for its restart and workload only, and
// only if watcher signed it.
func TestDoneMark(t *testing.T) {
	sign := hash.NewHasher([]byte("installation-key-0123456789abcd")).MAC
	other := hash.NewHasher([]byte("another-installation-key-012345")).MAC
	at := time.Unix(1700000000, 0)
	mark := map[string]string{evict.DoneAnnotation: evict.DoneMark(at, "uid-1", sign)}
	tests := []struct {
		name string
		ann  map[string]string
		at   time.Time
		uid  string
		sign evict.Signer
		want bool
	}{
		{"its restart", mark, at, "uid-1", sign, true},
		{"another restart", mark, at.Add(time.Second), "uid-1", sign, false},
		{"copied to another workload", mark, at, "uid-2", sign, false},
		{"another installation", mark, at, "uid-1", other, false},
		{"edited", map[string]string{evict.DoneAnnotation: "1700000000.forged"}, at, "uid-1", sign, false},
		{"none", nil, at, "uid-1", sign, false},
		{"no key", mark, at, "uid-1", nil, false},
	}
	for _, tt := range tests {
		if got := evict.IsDone(tt.ann, tt.at, tt.uid, tt.sign); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestForbidden: a request watcher's rights refuse is a ForbiddenError
// naming the right; any other error is not.
func TestForbidden(t *testing.T) {
	denied := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("RBAC"))
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "dep"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1"}}
	refusing := func(err error, what string) client.Client {
		return interceptor.NewClient(fake.NewClientBuilder().WithObjects(pod).Build(), interceptor.Funcs{
			List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, o ...client.ListOption) error {
				if _, ok := l.(*corev1.PodList); ok && what == "pods" {
					return err
				}
				return c.List(ctx, l, o...)
			},
			SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, o ...client.SubResourceCreateOption) error {
				return err
			},
		})
	}
	var fe *evict.ForbiddenError
	if _, err := evict.Pods(context.Background(), refusing(denied, "pods"), dep); !errors.As(err, &fe) || fe.Right() != "list pods in namespace ns" {
		t.Errorf("list pods: %v", err)
	}
	if err := evict.Evict(context.Background(), refusing(denied, ""), pod); !errors.As(err, &fe) || fe.Right() != "create pods/eviction in namespace ns" || !apierrors.IsForbidden(err) {
		t.Errorf("evict: %v", err)
	}
	if err := evict.Evict(context.Background(), refusing(apierrors.NewServiceUnavailable("down"), ""), pod); err == nil || errors.As(err, &fe) {
		t.Errorf("unavailable: %v", err)
	}
}
