package sealed_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/lock"
	"github.com/watcher-dev/watcher/internal/sealed"
)

// TestWatcherClaims: the watcher claims each change of a SealedSecret
// under the name package lock gives it, the name every replica takes its
// lock under: a creation and an update by the object's UID and version, a
// deletion as the controller names one.
func TestWatcherClaims(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{sealed.GVR: "SealedSecretList"})
	var mu sync.Mutex
	var claimed []string
	w := sealed.NewWatcher(sealed.Options{
		Dynamic: dyn, Hasher: hash.NewHasher([]byte("k")), Log: logr.Discard(),
		Claim: func(_ context.Context, id string) bool {
			mu.Lock()
			defer mu.Unlock()
			claimed = append(claimed, id)
			return false
		},
	})
	if err := w.Enable(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Disable()
	// A creation before the informer watches would be taken for an object
	// that existed at Enable.
	for !slices.ContainsFunc(dyn.Actions(), func(a k8stesting.Action) bool { return a.GetVerb() == "watch" }) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // the watch asked for is set up

	res := dyn.Resource(sealed.GVR).Namespace("shop")
	created := sealedSecret(map[string]any{"password": ciphertext})
	if _, err := res.Create(ctx, created, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	updated := sealedSecret(map[string]any{"password": ciphertext + "x"})
	updated.SetResourceVersion("8")
	if _, err := res.Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := res.Delete(ctx, "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		lock.ID(sealed.GVK.Kind, created), lock.ID(sealed.GVK.Kind, updated),
		lock.DeletedID(sealed.GVK.Kind, "shop", "db", "u1"),
	}
	if want[0] != "SealedSecret/shop/db/u1@7" {
		t.Fatalf("lock.ID = %q", want[0])
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		got := slices.Clone(claimed)
		mu.Unlock()
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("claimed %q, want %q", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
