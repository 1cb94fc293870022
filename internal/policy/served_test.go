package policy

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"

	"github.com/watcher-dev/watcher/api/v1alpha1"
	"github.com/watcher-dev/watcher/internal/served"
)

// switchedDiscovery serves ReloadPolicies while on; safe for concurrent
// use.
type switchedDiscovery struct {
	*fakediscovery.FakeDiscovery
	mu sync.Mutex
	on bool
}

func (d *switchedDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.on || gv != v1alpha1.GroupVersion.String() {
		return nil, apierrors.NewNotFound(schema.GroupResource{}, gv)
	}
	return &metav1.APIResourceList{GroupVersion: gv, APIResources: []metav1.APIResource{{Name: Resource}}}, nil
}

func (d *switchedDiscovery) set(on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.on = on
}

// TestWatcherFollowsTheCRDWatch: through served.Watcher (a watch of the
// CRDs, client-go's fakes), the ReloadPolicy CRD created while watcher runs
// turns policies on within seconds; deleted, they stay on until its
// absence is confirmed (Confirm), then go off without another CRD event.
func TestWatcherFollowsTheCRDWatch(t *testing.T) {
	g := gomega.NewWithT(t)
	s := runtime.NewScheme()
	g.Expect(metav1.AddMetaToScheme(s)).To(gomega.Succeed())
	crds := metadatafake.NewSimpleMetadataClient(s)
	disc := &switchedDiscovery{FakeDiscovery: &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}}
	sw := served.NewWith(crds, disc, logr.Discard())
	rc, err := rest.RESTClientFor(&rest.Config{Host: "http://127.0.0.1:1", APIPath: "/apis",
		ContentConfig: rest.ContentConfig{GroupVersion: &v1alpha1.GroupVersion, NegotiatedSerializer: noSerializer()}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	const confirm = 2 * time.Second
	w := &Watcher{Index: NewIndex(), Store: &stubStore{}, Log: logr.Discard(), rest: rc, Served: sw, Confirm: confirm}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, r := range []interface{ Start(context.Context) error }{sw, w} {
		wg.Go(func() { _ = r.Start(ctx) })
	}
	defer wg.Wait()
	defer cancel()

	g.Eventually(w.Synced, 5*time.Second, 10*time.Millisecond).Should(gomega.BeTrue(), "synced without the CRD")
	// The fake client's watch replays nothing: a CRD is made once the CRDs
	// are listed and followed, as the API server's watch would have it.
	g.Eventually(sw.Watching, 5*time.Second, 10*time.Millisecond).Should(gomega.BeTrue())
	g.Expect(w.On()).To(gomega.BeFalse())

	crd := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: Resource + "." + v1alpha1.GroupVersion.Group}}
	_, err = crds.Resource(served.CRDs).(metadatafake.MetadataClient).CreateFake(crd, metav1.CreateOptions{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	disc.set(true)
	g.Eventually(w.On, 5*time.Second, 10*time.Millisecond).Should(gomega.BeTrue(), "policies on once the CRD is served")

	disc.set(false)
	g.Expect(crds.Resource(served.CRDs).Delete(ctx, crd.Name, metav1.DeleteOptions{})).To(gomega.Succeed())
	deleted := time.Now()
	g.Consistently(w.On, confirm-500*time.Millisecond, 50*time.Millisecond).Should(gomega.BeTrue(), "policies kept until the absence is confirmed")
	g.Eventually(w.On, 5*time.Second, 10*time.Millisecond).Should(gomega.BeFalse(), "policies off once it is")
	t.Logf("policies off %s after the CRD was deleted (confirm %s)", time.Since(deleted).Round(time.Millisecond), confirm)
}
