package policy

import (
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/watcher-dev/watcher/api/v1alpha1"
	"github.com/watcher-dev/watcher/internal/workload"
)

// TestDecided: what a decision of shop/web tells the status writer, for
// a policy whose status lists web as pending (listed), one held by this
// replica only (journal), one waiting for missing sources (waiting), and
// one that is none of these (plain).
func TestDecided(t *testing.T) {
	web := workload.Key{Kind: "Deployment", Namespace: "shop", Name: "web"}
	tests := []struct {
		name              string
		restart, recorded bool
		released          []string // policies whose journal releases web
		queued            []string // policies whose status is written again
	}{
		{"nothing to restart (change reverted, or restart written)", false, false, []string{"journal", "listed"}, []string{"journal", "listed"}},
		{"nothing to restart, record changed", false, true, []string{"journal", "listed"}, []string{"journal", "listed", "waiting"}},
		{"a restart to write (or held)", true, false, nil, nil},
		{"a restart, record changed", true, true, nil, []string{"waiting"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inf := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, &v1alpha1.ReloadPolicy{}, 0, toolscache.Indexers{})
			var ps []*Policy
			for _, name := range []string{"journal", "listed", "plain", "waiting"} {
				rp := &v1alpha1.ReloadPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Generation: 1}}
				if name == "listed" {
					rp.Status.Pending = []v1alpha1.PendingRestart{{Kind: "Deployment", Name: "web", Reason: ReasonMaintenanceWindow}}
				}
				if err := inf.GetStore().Add(rp); err != nil {
					t.Fatal(err)
				}
				ps = append(ps, Compile(rp))
			}
			s := &StatusWriter{
				watcher:  &Watcher{Index: NewIndex(), Log: logr.Discard(), infs: []toolscache.SharedIndexInformer{inf}},
				queue:    workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
				journals: map[string]*Journal{}, retries: map[string]retryState{"shop/waiting": {n: 3, generation: 1}},
			}
			defer s.queue.ShutDown()
			s.Held(ps[:1], web, time.Now())
			for s.queue.Len() > 0 {
				k, _ := s.queue.Get()
				s.queue.Done(k)
			}

			s.Decided(ps, web, tt.restart, tt.recorded)
			var released []string
			for _, p := range ps {
				if j := s.journals[p.Key()]; j != nil && j.Released[web] {
					if _, held := j.held(web); held {
						t.Errorf("%s: web both held and released", p.Name)
					}
					released = append(released, p.Name)
				}
			}
			var queued []string
			for s.queue.Len() > 0 {
				k, _ := s.queue.Get()
				s.queue.Done(k)
				queued = append(queued, k[len("shop/"):])
			}
			if !sameSet(released, tt.released) || !sameSet(queued, tt.queued) {
				t.Errorf("released %v, queued %v; want %v, %v", released, queued, tt.released, tt.queued)
			}
			if _, waiting := s.retries["shop/waiting"]; waiting == tt.recorded {
				t.Errorf("recorded %v: the wait for missing sources kept %v", tt.recorded, waiting)
			}
			// What the status then says: web no longer pending.
			listed := Desired(ps[1], v1alpha1.ReloadPolicyStatus{Pending: []v1alpha1.PendingRestart{{Kind: "Deployment", Name: "web"}}},
				metav1.Condition{Type: ConditionReady}, s.snapshot("shop/listed"), []workload.Key{web})
			if pending := len(listed.Pending) > 0; pending != tt.restart {
				t.Errorf("status.pending of listed: %v, want pending %v", listed.Pending, tt.restart)
			}
		})
	}
}

func sameSet(a, b []string) bool {
	m := map[string]int{}
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		m[x]--
	}
	for _, n := range m {
		if n != 0 {
			return false
		}
	}
	return true
}

// TestRetry: the waits of one policy's re-checks grow while its
// generation stays, and start over when it changes.
func TestRetry(t *testing.T) {
	s := &StatusWriter{retries: map[string]retryState{}}
	var got []time.Duration
	for _, gen := range []int64{1, 1, 1, 2, 2} {
		got = append(got, s.retry("shop/p", gen))
	}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 2 * time.Second, 4 * time.Second}
	if !slices.Equal(got, want) {
		t.Errorf("waits %v, want %v", got, want)
	}
}
