package store_test

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/resolve"
	"github.com/watcher-dev/watcher/internal/store"
	"github.com/watcher-dev/watcher/test/fixture"
)

// TestSnapshotUsers: the change of a snapshot (labelled pin.SnapshotLabel)
// reaches no workload that only matches objects of its namespace (a
// pattern reload list), only those that name it; the change of any other
// object, or of one the store does not hold (deleted), reaches the
// matching workloads too. Resolving against the store's objects (labels
// as the store keeps them) leaves the snapshot out of the pattern.
func TestSnapshotUsers(t *testing.T) {
	const snap = "app-config-pin-0123456789abcdef0123"
	snapshot := func(kind refs.Kind, name string) runtime.Object {
		meta := fixture.Meta("a", name)
		meta.Labels = map[string]string{pin.SnapshotLabel: "true", "app": "web"}
		if kind == refs.Secret {
			return &corev1.Secret{ObjectMeta: meta}
		}
		return &corev1.ConfigMap{ObjectMeta: meta}
	}
	pattern := fixture.Deployment("a", "pattern", fixture.PodSpec(corev1.Container{Name: "app"}))
	pattern.Annotations = map[string]string{optin.ConfigMapReload: "app-.*", optin.SecretReload: "app-.*"}
	objs := []runtime.Object{
		fixture.ConfigMap("a", "app-config", nil),
		snapshot(refs.ConfigMap, snap),
		fixture.ConfigMap("a", "app-other-pin-0123456789abcdef0123", nil), // the name's shape, no label
		snapshot(refs.Secret, "app-tls-pin-0123456789abcdef0123"),
		pattern,
		fixture.Deployment("a", "pinned", fixture.EnvFrom(snap, "")),
	}
	r := resolve.Standard(resolve.Settings{})
	st, err := store.New(kubefake.NewClientset(objs...), store.Options{
		Namespaces: []string{"a"}, Hasher: hash.NewHasher([]byte("0123456789abcdef")),
		WorkloadAnnotations: []string{optin.ConfigMapReload, optin.SecretReload},
		Refs:                r.Refs, Wildcards: r.Wildcards,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = st.Start(ctx) }()
	if !toolscache.WaitForCacheSync(ctx.Done(), st.HasSynced) {
		t.Fatal("store did not sync")
	}
	for _, tt := range []struct {
		name       string
		kind       refs.Kind
		changed    string
		want, keys []string
	}{
		{"a source", refs.ConfigMap, "app-config", []string{"pattern"}, []string{"Deployment/a/pattern"}},
		{"a snapshot: only who names it", refs.ConfigMap, snap, []string{"pinned"}, []string{"Deployment/a/pinned"}},
		{"a Secret snapshot: no one", refs.Secret, "app-tls-pin-0123456789abcdef0123", nil, nil},
		{"the name's shape, no label: a source", refs.ConfigMap, "app-other-pin-0123456789abcdef0123", []string{"pattern"}, []string{"Deployment/a/pattern"}},
		{"not held (deleted): it may have been a source", refs.ConfigMap, "app-gone", []string{"pattern"}, []string{"Deployment/a/pattern"}},
	} {
		us, err := st.Users(tt.kind, "a", tt.changed)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, u := range us {
			got = append(got, u.Obj.Name)
		}
		slices.Sort(got)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: Users (-want +got):\n%s", tt.name, diff)
		}
		keys, err := st.UsersOf(tt.kind, "a", tt.changed)
		if err != nil {
			t.Fatal(err)
		}
		var gotKeys []string
		for _, k := range keys {
			gotKeys = append(gotKeys, k.Kind+"/"+k.Namespace+"/"+k.Name)
		}
		slices.Sort(gotKeys)
		if diff := cmp.Diff(tt.keys, gotKeys); diff != "" {
			t.Errorf("%s: UsersOf (-want +got):\n%s", tt.name, diff)
		}
	}
	uses, err := r.Resolve(pattern, st)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range uses {
		got = append(got, string(u.Kind)+"/"+u.Name)
	}
	if diff := cmp.Diff([]string{"ConfigMap/app-config", "ConfigMap/app-other-pin-0123456789abcdef0123"}, got); diff != "" {
		t.Errorf("Resolve against the store (-want +got):\n%s", diff)
	}
}
