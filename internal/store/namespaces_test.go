package store_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/packed"
	"github.com/watcher-dev/watcher/internal/store"
)

// TestSelected: without a namespace selector every namespace is selected
// and no namespace is watched; with one, those whose labels match, kept as
// metadata only.
func TestSelected(t *testing.T) {
	ns := func(name string, labels map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}}}
	}
	cs := kubefake.NewClientset(ns("on", map[string]string{"team": "on"}), ns("off", map[string]string{"team": "off"}), ns("bare", nil))
	hasher := hash.NewHasher([]byte("0123456789abcdef"))
	for _, tt := range []struct {
		selector string
		want     map[string]bool
		informer bool
	}{
		{"", map[string]bool{"on": true, "off": true, "bare": true, "missing": true}, false},
		{"team=on", map[string]bool{"on": true, "off": false, "bare": false, "missing": false}, true},
		{"team", map[string]bool{"on": true, "off": true, "bare": false}, true},
	} {
		st, err := store.New(cs, store.Options{NamespaceSelector: tt.selector, Hasher: hasher})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() { _ = st.Start(ctx) }()
		if !toolscache.WaitForCacheSync(ctx.Done(), st.HasSynced) {
			t.Fatal("store did not sync")
		}
		for name, want := range tt.want {
			if got := st.Selected(name); got != want {
				t.Errorf("selector %q: Selected(%s) = %t, want %t", tt.selector, name, got, want)
			}
		}
		infs := st.Informers(store.KindNamespace)
		if (len(infs) == 1) != tt.informer {
			t.Errorf("selector %q: %d namespace informers", tt.selector, len(infs))
		}
		for _, inf := range infs {
			for _, o := range inf.GetStore().List() {
				if _, ok := o.(*packed.Object); !ok {
					t.Errorf("selector %q: the store holds a %T, not a packed object", tt.selector, o)
				}
			}
		}
		cancel()
	}
}
