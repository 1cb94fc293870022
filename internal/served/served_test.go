package served

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
)

var rollouts = API{GroupVersion: "argoproj.io/v1alpha1", Resource: "rollouts"}

// fakeDisc serves what is set, safe for concurrent use, and counts the
// calls.
type fakeDisc struct {
	*fakediscovery.FakeDiscovery
	mu     sync.Mutex
	served bool
	fail   bool
	calls  int
}

func newDiscovery() *fakeDisc {
	return &fakeDisc{FakeDiscovery: &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}}
}

func (d *fakeDisc) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	if d.fail {
		return nil, apierrors.NewServiceUnavailable("discovery down")
	}
	if !d.served || gv != rollouts.GroupVersion {
		return nil, apierrors.NewNotFound(schema.GroupResource{}, gv)
	}
	return &metav1.APIResourceList{GroupVersion: gv, APIResources: []metav1.APIResource{{Name: rollouts.Resource}}}, nil
}

func (d *fakeDisc) set(served, fail bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.served, d.fail = served, fail
}

func (d *fakeDisc) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls
}

// answers records the answers a follower is told.
type answers struct {
	mu   sync.Mutex
	all  []Answer
	next func() time.Duration // what the follower returns; nil: 0
}

func (a *answers) follow(_ context.Context, ans Answer) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.all = append(a.all, ans)
	if a.next != nil {
		return a.next()
	}
	return 0
}

func (a *answers) last() Answer {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.all) == 0 {
		return Answer{}
	}
	return a.all[len(a.all)-1]
}

func (a *answers) len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.all)
}

func crd(name string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}
}

func newMetadata() *metadatafake.FakeMetadataClient {
	s := runtime.NewScheme()
	metav1.AddMetaToScheme(s)
	return metadatafake.NewSimpleMetadataClient(s)
}

// start runs w until the test ends.
func start(t *testing.T, w *Watcher) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := w.Start(ctx); err != nil {
			t.Error(err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// TestFollowsTheCRD: one answer at start; a CRD created while watcher runs
// is asked about again, with backoff, until discovery serves it (a new
// CRD is served once established); nothing changes: no discovery call;
// the CRD deleted: not served. CRDs of other APIs are not asked about.
func TestFollowsTheCRD(t *testing.T) {
	g := NewWithT(t)
	mc, disc := newMetadata(), newDiscovery()
	w := &Watcher{Log: logr.Discard(), crds: mc, discovery: disc}
	var a answers
	w.Follow(rollouts, a.follow)
	start(t, w)

	// At start, and once more when the CRDs are listed (unless that check
	// was still queued).
	g.Eventually(w.Watching, 5*time.Second, 10*time.Millisecond).Should(BeTrue())
	g.Eventually(a.len, 5*time.Second, 10*time.Millisecond).Should(BeNumerically(">=", 1))
	g.Expect(a.last()).To(Equal(Answer{Known: true}), "at start, without the CRD")

	created := time.Now()
	_, err := mc.Resource(CRDs).(metadatafake.MetadataClient).CreateFake(crd(rollouts.CRD()), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	time.Sleep(400 * time.Millisecond) // not established yet
	disc.set(true, false)
	g.Eventually(a.last, 5*time.Second, 10*time.Millisecond).Should(Equal(Answer{Served: true, Known: true}))
	t.Logf("served %s after the CRD was created (answers %d)", time.Since(created).Round(time.Millisecond), a.len())

	calls := disc.count()
	_, err = mc.Resource(CRDs).(metadatafake.MetadataClient).CreateFake(crd("sealedsecrets.bitnami.com"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Consistently(disc.count, 2*time.Second, 50*time.Millisecond).Should(Equal(calls), "discovery asked while nothing of the API changed")

	disc.set(false, false)
	g.Expect(mc.Resource(CRDs).Delete(context.Background(), rollouts.CRD(), metav1.DeleteOptions{})).To(Succeed())
	g.Eventually(a.last, 5*time.Second, 10*time.Millisecond).Should(Equal(Answer{Known: true}), "the CRD deleted")
}

// TestFailedCallsAskedAgain: a discovery call that fails tells nothing and
// is made again until one answers, CRD event or not.
func TestFailedCallsAskedAgain(t *testing.T) {
	g := NewWithT(t)
	disc := newDiscovery()
	disc.set(true, true)
	mc := newMetadata()
	// The CRD exists: once discovery answers, it agrees with it.
	_, err := mc.Resource(CRDs).(metadatafake.MetadataClient).CreateFake(crd(rollouts.CRD()), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	w := &Watcher{Log: logr.Discard(), crds: mc, discovery: disc}
	var a answers
	w.Follow(rollouts, a.follow)
	start(t, w)
	g.Eventually(a.len, 5*time.Second, 10*time.Millisecond).Should(BeNumerically(">=", 2))
	g.Expect(a.last()).To(Equal(Answer{}))
	disc.set(true, false)
	g.Eventually(a.last, 5*time.Second, 10*time.Millisecond).Should(Equal(Answer{Served: true, Known: true}))
	// The check made once more when the CRDs are listed may come after the
	// answer: it is not a retry.
	g.Eventually(w.Watching, 5*time.Second, 10*time.Millisecond).Should(BeTrue())
	time.Sleep(200 * time.Millisecond)
	calls := disc.count()
	g.Consistently(disc.count, time.Second, 50*time.Millisecond).Should(Equal(calls), "asked again after an answer")
}

// TestFallback: CRDs may not be listed (RBAC): discovery is asked every
// Fallback instead, and a new API is found all the same.
func TestFallback(t *testing.T) {
	g := NewWithT(t)
	mc, disc := newMetadata(), newDiscovery()
	mc.PrependReactor("list", "customresourcedefinitions", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(CRDs.GroupResource(), "", nil)
	})
	w := &Watcher{Log: logr.Discard(), crds: mc, discovery: disc, Fallback: 200 * time.Millisecond}
	var a answers
	w.Follow(rollouts, a.follow)
	start(t, w)
	g.Eventually(a.len, 5*time.Second, 10*time.Millisecond).Should(Equal(1))
	disc.set(true, false)
	g.Eventually(a.last, 5*time.Second, 10*time.Millisecond).Should(Equal(Answer{Served: true, Known: true}))
	n := a.len()
	g.Eventually(a.len, 5*time.Second, 10*time.Millisecond).Should(BeNumerically(">", n), "still asked every Fallback")
}

// TestAskAgain: a follower that asks to be asked again after d is, once;
// a follower added after start is asked at once.
func TestAskAgain(t *testing.T) {
	g := NewWithT(t)
	disc := newDiscovery()
	w := &Watcher{Log: logr.Discard(), crds: newMetadata(), discovery: disc}
	var a answers
	var at []time.Time // when each answer came (under a.mu)
	a.next = func() time.Duration {
		at = append(at, time.Now())
		if len(at) == 1 {
			return 300 * time.Millisecond
		}
		return 0
	}
	w.Follow(rollouts, a.follow)
	start(t, w)
	// At start, then once more when the CRDs are listed (unless that
	// check was still queued), then the one asked for, 300 ms after the
	// first: two or three answers, and no more.
	g.Eventually(func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return len(at) >= 2 && at[len(at)-1].Sub(at[0]) >= 300*time.Millisecond
	}, 5*time.Second, 10*time.Millisecond).Should(BeTrue(), "asked again 300 ms after the first answer")
	n := a.len()
	g.Expect(n).To(BeNumerically("<=", 3))
	g.Consistently(a.len, time.Second, 50*time.Millisecond).Should(Equal(n))

	var late answers
	w.Follow(API{GroupVersion: "watcher.dev/v1alpha1", Resource: "reloadpolicies"}, late.follow)
	g.Eventually(late.len, 5*time.Second, 10*time.Millisecond).Should(Equal(1))
	g.Expect(late.last()).To(Equal(Answer{Known: true}))
}

func TestCRD(t *testing.T) {
	for api, want := range map[API]string{
		rollouts: "rollouts.argoproj.io",
		{GroupVersion: "bitnami.com/v1alpha1", Resource: "sealedsecrets"}: "sealedsecrets.bitnami.com",
	} {
		if got := api.CRD(); got != want {
			t.Errorf("%v.CRD() = %q, want %q", api, got, want)
		}
	}
}

// TestBlockedFollower: a follower that blocks until another API is
// answered (an optional kind's Enable waits for the controller, which
// waits for the ReloadPolicy answer) holds up no other API.
func TestBlockedFollower(t *testing.T) {
	g := NewWithT(t)
	disc := newDiscovery()
	disc.set(true, false)
	w := &Watcher{Log: logr.Discard(), crds: newMetadata(), discovery: disc}
	policies := make(chan struct{})
	var once, enabledOnce sync.Once
	enabled := make(chan struct{})
	w.Follow(rollouts, func(context.Context, Answer) time.Duration {
		select {
		case <-policies:
			// Asked at start and again once the CRDs are listed.
			enabledOnce.Do(func() { close(enabled) })
		case <-time.After(5 * time.Second):
		}
		return 0
	})
	w.Follow(API{GroupVersion: "watcher.dev/v1alpha1", Resource: "reloadpolicies"}, func(context.Context, Answer) time.Duration {
		once.Do(func() { close(policies) })
		return 0
	})
	start(t, w)
	g.Eventually(enabled, 3*time.Second).Should(BeClosed(), "the blocked follower was let go by the other API's answer")
}
