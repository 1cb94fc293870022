package cli

import (
	"context"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/workload"
)

// TestAttackKeepSnapshotsReadsNoValue: the rollback makes the workload an
// owner of the snapshots it pins back; that needs their owners only. It
// read each snapshot whole, a Secret's values with it, into the CLI of
// whoever runs the rollback (rollback otherwise reads snapshots' metadata
// only, snapshotGone).
func TestAttackKeepSnapshotsReadsNoValue(t *testing.T) {
	snap := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db-pin-1",
		Labels:          map[string]string{pin.SnapshotLabel: "true"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "rs-1"}}},
		Data: map[string][]byte{"password": []byte("hunter2")}}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "dep-1"}}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(snap).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Secret); ok {
				return errors.New("read a Secret's values")
			}
			return c.Get(ctx, key, obj, opts...)
		}}).Build()
	pins := pin.Pins{{Kind: pin.Secret, Name: "db"}: "db-pin-1"}
	if err := (&reader{c: c}).keepSnapshots(context.Background(), workload.Deployment, dep, pins); err != nil {
		t.Fatal(err)
	}
	got := &metav1.PartialObjectMetadata{}
	got.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(snap), got); err != nil {
		t.Fatal(err)
	}
	if len(got.OwnerReferences) != 2 || got.OwnerReferences[1].UID != "dep-1" {
		t.Errorf("owners %+v: want the ReplicaSet's and the Deployment's", got.OwnerReferences)
	}
}

// TestAttackRollbackDryRunChecksSnapshots: --dry-run says the API server
// checked the rollback; it skipped the snapshots' owners altogether, so
// that a dry run succeeded for someone who may not patch Secrets, whose
// rollback then failed. A dry run sends those patches as dry runs too,
// and changes nothing.
func TestAttackRollbackDryRunChecksSnapshots(t *testing.T) {
	snap := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db-pin-1",
		Labels: map[string]string{pin.SnapshotLabel: "true"}}}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "dep-1"}}
	pins := pin.Pins{{Kind: pin.Secret, Name: "db"}: "db-pin-1"}
	var dryRuns int
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(snap).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			po := &client.PatchOptions{}
			po.ApplyOptions(opts)
			if len(po.DryRun) > 0 {
				dryRuns++
			}
			return c.Patch(ctx, obj, patch, opts...)
		}}).Build()
	if err := (&reader{c: c}).keepSnapshots(context.Background(), workload.Deployment, dep, pins, client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	if dryRuns != 1 {
		t.Errorf("%d dry-run patches, want 1", dryRuns)
	}
	got := &metav1.PartialObjectMetadata{}
	got.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(snap), got); err != nil {
		t.Fatal(err)
	}
	if len(got.OwnerReferences) != 0 {
		t.Errorf("owners %+v after a dry run: want none", got.OwnerReferences)
	}
}
