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
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/store"
	"github.com/watcher-dev/watcher/internal/workload"
	"github.com/watcher-dev/watcher/test/fixture"
)

// TestStore fills a store from a fake API and checks what it holds: only
// the watched namespaces, digests instead of data, and users found by index.
func TestStore(t *testing.T) {
	objs := []runtime.Object{
		fixture.ConfigMap("a", "cfg", map[string]string{"k": "v"}),
		&corev1.Secret{ObjectMeta: fixture.Meta("a", "sec"), Data: map[string][]byte{"password": []byte("s3cret")}},
		fixture.Deployment("a", "web", fixture.EnvFrom("cfg", "sec")),
		fixture.StatefulSet("a", "db", fixture.EnvFrom("", "sec")),
		fixture.DaemonSet("a", "agent", fixture.EnvFrom("other", "")),
		fixture.Deployment("b", "web", fixture.EnvFrom("cfg", "")),
		fixture.ConfigMap("c", "cfg", nil),
		fixture.Deployment("c", "web", fixture.EnvFrom("cfg", "")),
		// Names and keys the API server accepts, however odd: once, one such
		// workload made the index function fail and client-go panic.
		fixture.Deployment("a", "odd", fixture.PodSpec(corev1.Container{},
			corev1.Volume{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "x;y"}}},
			corev1.Volume{Name: "c", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Items: []corev1.KeyToPath{{Key: "*", Path: "1"}, {Key: "a,b", Path: "2"}},
			}}},
		)),
	}
	hasher := hash.NewHasher([]byte("0123456789abcdef"))
	st, err := store.New(kubefake.NewClientset(objs...), store.Options{Namespaces: []string{"a", "b"}, Hasher: hasher})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = st.Start(ctx) }()
	if !toolscache.WaitForCacheSync(ctx.Done(), st.HasSynced) {
		t.Fatal("store did not sync")
	}

	for kind, want := range map[string]int{"ConfigMap": 1, "Secret": 1, "Deployment": 3, "StatefulSet": 1, "DaemonSet": 1} {
		if got := st.Count(kind); got != want {
			t.Errorf("Count(%s) = %d, want %d", kind, got, want)
		}
	}
	sec, err := st.Get("Secret", "a", "sec")
	if err != nil || sec == nil {
		t.Fatalf("Get(Secret a/sec) = %v, %v", sec, err)
	}
	d, err := hash.FromObject(sec)
	want, _ := hasher.OfObject(objs[1])
	if err != nil || d.Sum != want.Sum {
		t.Errorf("digest of a/sec = %+v, %v; want %+v", d, err, want)
	}
	if got, _ := st.Get("ConfigMap", "c", "cfg"); got != nil {
		t.Errorf("namespace c is not watched, but Get found %v", got)
	}

	users := func(kind refs.Kind, ns, name string) map[string]bool {
		us, err := st.Users(kind, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, u := range us {
			out[u.Kind+" "+u.Obj.Namespace+"/"+u.Obj.Name] = true
		}
		return out
	}
	for _, tt := range []struct {
		kind     refs.Kind
		ns, name string
		want     []string
	}{
		{refs.Secret, "a", "sec", []string{"Deployment a/web", "StatefulSet a/db"}},
		{refs.ConfigMap, "a", "cfg", []string{"Deployment a/web", "Deployment a/odd"}},
		{refs.Secret, "a", "x;y", []string{"Deployment a/odd"}},
		{refs.Secret, "a", "x", nil},
		{refs.ConfigMap, "b", "cfg", []string{"Deployment b/web"}},
		{refs.ConfigMap, "a", "other", []string{"DaemonSet a/agent"}},
		{refs.Secret, "a", "cfg", nil},
		{refs.ConfigMap, "c", "cfg", nil},
	} {
		got := users(tt.kind, tt.ns, tt.name)
		if len(got) != len(tt.want) {
			t.Errorf("Users(%s %s/%s) = %v, want %v", tt.kind, tt.ns, tt.name, got, tt.want)
		}
		for _, w := range tt.want {
			if !got[w] {
				t.Errorf("Users(%s %s/%s) = %v, want %v", tt.kind, tt.ns, tt.name, got, tt.want)
			}
		}
	}
	web, _ := st.Get("Deployment", "a", "web")
	if web.Kind != "Deployment" || web.APIVersion != "apps/v1" {
		t.Errorf("a cached workload must know its kind, for Events and patches: %+v", web.TypeMeta)
	}
	// What Get gives is the caller's: changing it changes neither the
	// store nor its indexes.
	web.Annotations[workload.RefsAnnotation] = ""
	web.Name = "changed"
	if again, _ := st.Get("Deployment", "a", "web"); again == nil || again.Annotations[workload.RefsAnnotation] == "" {
		t.Errorf("changing what Get gave changed the store: %+v", again)
	}
	if got := users(refs.Secret, "a", "sec"); !got["Deployment a/web"] {
		t.Errorf("changing what Get gave changed the index: %v", got)
	}
}

// TestWildcardUsers: a workload that matches objects (resolve.Matcher) is a
// user of every object of that kind in its namespace, once even when it
// also names the object; List reads a namespace's objects from the cache,
// in a store of every namespace and in one of a few.
func TestWildcardUsers(t *testing.T) {
	objs := []runtime.Object{
		fixture.ConfigMap("a", "app-1", nil), fixture.ConfigMap("a", "app-2", nil), fixture.ConfigMap("b", "app-3", nil),
		fixture.Deployment("a", "matcher", fixture.EnvFrom("app-1", "")),
		fixture.Deployment("a", "plain", fixture.EnvFrom("app-2", "")),
		fixture.Deployment("b", "matcher", fixture.PodSpec(corev1.Container{})),
	}
	wild := func(o client.Object) []refs.Kind {
		if o.GetName() == "matcher" {
			return []refs.Kind{refs.ConfigMap}
		}
		return nil
	}
	for _, namespaces := range [][]string{nil, {"a", "b"}} {
		st, err := store.New(kubefake.NewClientset(objs...), store.Options{Namespaces: namespaces, Hasher: hash.NewHasher([]byte("0123456789abcdef")), Wildcards: wild})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() { _ = st.Start(ctx) }()
		if !toolscache.WaitForCacheSync(ctx.Done(), st.HasSynced) {
			t.Fatal("store did not sync")
		}
		users := func(ns, name string) []string {
			us, err := st.Users(refs.ConfigMap, ns, name)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, u := range us {
				out = append(out, u.Obj.Name)
			}
			slices.Sort(out)
			return out
		}
		for _, tt := range []struct {
			ns, name string
			want     []string
		}{
			{"a", "app-1", []string{"matcher"}},
			{"a", "app-2", []string{"matcher", "plain"}},
			{"a", "new", []string{"matcher"}},
			{"b", "app-3", []string{"matcher"}},
			{"c", "x", nil},
		} {
			if diff := cmp.Diff(tt.want, users(tt.ns, tt.name)); diff != "" {
				t.Errorf("namespaces %v: users of %s/%s (-want +got):\n%s", namespaces, tt.ns, tt.name, diff)
			}
		}
		listed, err := st.List(refs.ConfigMap, "a")
		if err != nil || len(listed) != 2 {
			t.Errorf("namespaces %v: List(a) = %d objects, %v; want 2", namespaces, len(listed), err)
		}
		if none, _ := st.List(refs.Secret, "a"); len(none) != 0 {
			t.Errorf("namespaces %v: List(Secret, a) = %d objects", namespaces, len(none))
		}
		cancel()
	}
}
