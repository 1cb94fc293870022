package cli

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestNeighbours: the ServiceAccounts and ConfigMaps of Reloader's
// namespace are listed by name, those of no other namespace; a list
// refused says why, for the warning.
func TestNeighbours(t *testing.T) {
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "reloader-reloader"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns"}, Data: map[string]string{"Corefile": "."}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cfg"}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).Build()
	n := (&reader{c: c}).neighbours(context.Background(), "kube-system")
	slices.Sort(n.ServiceAccounts)
	if !slices.Equal(n.ServiceAccounts, []string{"coredns", "reloader-reloader"}) || !slices.Equal(n.ConfigMaps, []string{"coredns"}) || n.Unread != "" {
		t.Errorf("neighbours = %+v", n)
	}

	refused := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*metav1.PartialObjectMetadataList); ok && list.GetObjectKind().GroupVersionKind().Kind == "ConfigMapList" {
				return errors.New("configmaps is forbidden")
			}
			return c.List(ctx, list, opts...)
		}}).Build()
	n = (&reader{c: refused}).neighbours(context.Background(), "kube-system")
	if !strings.Contains(n.Unread, "list configmaps of kube-system: configmaps is forbidden") || n.ServiceAccounts != nil {
		t.Errorf("neighbours = %+v: want why not, and no names", n)
	}
}
