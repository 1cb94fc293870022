package store_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/slim"
	"github.com/watcher-dev/watcher/internal/store"
	"github.com/watcher-dev/watcher/internal/workload"
	"github.com/watcher-dev/watcher/test/fixture"
)

// TestReindex: a source of references outside the object (a policy,
// recorded on the stored object by Annotate) changes; Reindex moves the
// workload from the users of the objects it named before to those it
// names after, and no other workload; Workloads lists a namespace's
// workloads with their labels, or every namespace's.
func TestReindex(t *testing.T) {
	web := fixture.Deployment("a", "web", fixture.PodSpec(corev1.Container{}))
	web.Labels = map[string]string{"app": "web"}
	objs := []runtime.Object{web, fixture.Deployment("a", "other", fixture.EnvFrom("used", "")), fixture.Deployment("b", "web", fixture.PodSpec(corev1.Container{}))}
	const key = "test/extra"
	var mu sync.Mutex
	extra := "before" // the object the outside source names for a/web
	annotate := func(m *metav1.PartialObjectMetadata) {
		mu.Lock()
		defer mu.Unlock()
		if m.Namespace == "a" && m.Name == "web" {
			m.Annotations[key] = extra
		}
	}
	refsOf := func(o client.Object) ([]refs.Ref, error) {
		rs, err := workload.Refs(o)
		if name := o.GetAnnotations()[key]; name != "" {
			rs = append(rs, refs.Ref{Kind: refs.ConfigMap, Name: name, AllKeys: true})
		}
		return rs, err
	}
	for _, namespaces := range [][]string{nil, {"a", "b"}} {
		st, err := store.New(kubefake.NewClientset(objs...), store.Options{
			Namespaces: namespaces, Hasher: hash.NewHasher([]byte("0123456789abcdef")), Refs: refsOf, Annotate: annotate,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() { _ = st.Start(ctx) }()
		if !toolscache.WaitForCacheSync(ctx.Done(), st.HasSynced) {
			t.Fatal("store did not sync")
		}
		users := func(name string) string {
			us, err := st.UsersOf(refs.ConfigMap, "a", name)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, u := range us {
				out = append(out, u.Name)
			}
			slices.Sort(out)
			return strings.Join(out, ",")
		}
		if got := users("before") + "|" + users("after") + "|" + users("used"); got != "web||other" {
			t.Errorf("namespaces %v: before the change: %s", namespaces, got)
		}
		mu.Lock()
		extra = "after"
		mu.Unlock()
		if found, err := st.Reindex("Deployment", "a", "web"); !found || err != nil {
			t.Fatalf("Reindex = %v, %v", found, err)
		}
		if got := users("before") + "|" + users("after") + "|" + users("used"); got != "|web|other" {
			t.Errorf("namespaces %v: after Reindex: %s", namespaces, got)
		}
		if found, err := st.Reindex("Deployment", "a", "absent"); found || err != nil {
			t.Errorf("Reindex of an absent workload = %v, %v", found, err)
		}
		ws, err := st.Workloads("Deployment", "a")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, w := range ws {
			names = append(names, w.GetName()+":"+slim.Labels(w).Get("app"))
		}
		slices.Sort(names)
		if diff := cmp.Diff([]string{"other:", "web:web"}, names); diff != "" {
			t.Errorf("namespaces %v: Workloads (-want +got):\n%s", namespaces, diff)
		}
		all, err := st.Workloads("Deployment", metav1.NamespaceAll)
		if err != nil {
			t.Fatal(err)
		}
		names = names[:0]
		for _, w := range all {
			names = append(names, w.GetNamespace()+"/"+w.GetName())
		}
		slices.Sort(names)
		if diff := cmp.Diff([]string{"a/other", "a/web", "b/web"}, names); diff != "" {
			t.Errorf("namespaces %v: Workloads of every namespace (-want +got):\n%s", namespaces, diff)
		}
		mu.Lock()
		extra = "before"
		mu.Unlock()
		cancel()
	}
}
