package restart

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// apiServer is controller-runtime's fake client counting the requests
// by verb and kind ("create Job"), with hooks: after, run after each
// request is answered; fail, which may refuse a request before it is sent.
type apiServer struct {
	client.WithWatch
	mu    sync.Mutex
	n     map[string]int
	after func(verb string, obj client.Object)
	fail  func(verb string, obj client.Object) error
}

func (a *apiServer) count(verb string, obj client.Object) error {
	if a.fail != nil {
		if err := a.fail(verb, obj); err != nil {
			return err
		}
	}
	kind := typeName(obj)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == nil {
		a.n = map[string]int{}
	}
	a.n[verb+" "+kind]++
	return nil
}

func (a *apiServer) calls(key string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n[key]
}

func (a *apiServer) total() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := 0
	for _, v := range a.n {
		t += v
	}
	return t
}

func typeName(obj client.Object) string {
	switch obj.(type) {
	case *batchv1.Job:
		return "Job"
	case *corev1.ConfigMap:
		return "ConfigMap"
	}
	return "other"
}

// newAPIServer serves objs.
func newAPIServer(objs ...client.Object) *apiServer {
	a := &apiServer{}
	hook := func(verb string, obj client.Object, ctx context.Context, do func() error) error {
		if err := ctx.Err(); err != nil { // as a real client: a cancelled request is not sent
			return err
		}
		if err := a.count(verb, obj); err != nil {
			return err
		}
		err := do()
		if a.after != nil {
			a.after(verb, obj)
		}
		return err
	}
	a.WithWatch = interceptor.NewClient(fake.NewClientBuilder().WithObjects(objs...).Build(), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			return hook("get", obj, ctx, func() error { return c.Get(ctx, key, obj, opts...) })
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			return hook("list", &corev1.ConfigMap{}, ctx, func() error { return c.List(ctx, list, opts...) })
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return hook("create", obj, ctx, func() error { return c.Create(ctx, obj, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return hook("delete", obj, ctx, func() error { return c.Delete(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return hook("patch", obj, ctx, func() error { return c.Patch(ctx, obj, patch, opts...) })
		},
	})
	return a
}

// oldJob is a Job that a restart re-creates, with finalizers.
func oldJob(finalizers ...string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "migrate", UID: "uid-old", ResourceVersion: "7",
			Annotations: map[string]string{"reloader.stakater.com/auto": "true"}, Finalizers: finalizers},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "app", Image: "migrate:1"}}}}},
	}
}

// newJob is what replaces oldJob.
func newJob() *batchv1.Job {
	j := oldJob()
	j.ObjectMeta = metav1.ObjectMeta{Namespace: "shop", Name: "migrate", Annotations: map[string]string{"reloader.stakater.com/auto": "true", "watcher.dev/config-hashes": "new"}}
	return j
}

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newTestRecreator(a *apiServer, c *clock) (*Recreator, *events.FakeRecorder) {
	rec := events.NewFakeRecorder(100)
	r := NewRecreator(a, a, "watcher", rec)
	r.now = c.now
	return r, rec
}

var migrate = types.NamespacedName{Namespace: "shop", Name: "migrate"}

// jobNow returns the Job shop/migrate, nil when there is none.
func jobNow(t *testing.T, a *apiServer) *batchv1.Job {
	t.Helper()
	j := &batchv1.Job{}
	if err := a.WithWatch.Get(context.Background(), migrate, j); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		t.Fatal(err)
	}
	return j
}

// records returns how many records the API server holds.
func records(t *testing.T, a *apiServer) int {
	t.Helper()
	var l corev1.ConfigMapList
	if err := a.WithWatch.List(context.Background(), &l, client.InNamespace("watcher"), client.HasLabels{RecreationLabel}); err != nil {
		t.Fatal(err)
	}
	return len(l.Items)
}

// TestRecreatorFinalizerDoesNotWait: a Job with a finalizer of its
// tenant's is deleted and Begin returns at once, the new Job pending; each
// look at it (Resume) costs at most two reads and is backed off per Job,
// doubling; looks within the backoff cost nothing; at BlockedAfter looks a
// Warning Event RecreateBlocked is sent, once. When the tenant's finalizer
// goes, the next look creates the Job, once, without watcher's finalizer,
// and removes the record.
func TestRecreatorFinalizerDoesNotWait(t *testing.T) {
	ctx := context.Background()
	a := newAPIServer(oldJob("tenant.example.com/keep"))
	c := &clock{t: time.Unix(1e9, 0)}
	r, rec := newTestRecreator(a, c)
	old := jobNow(t, a)

	start := time.Now()
	out, created, err := r.Begin(ctx, old, newJob(), nil)
	if err != nil || out != Pending || created != nil {
		t.Fatalf("Begin() = %v, %v, %v; want Pending", out, created, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Begin took %s", d)
	}
	if j := jobNow(t, a); j == nil || j.UID != "uid-old" || j.DeletionTimestamp == nil {
		t.Fatalf("the old Job is not left being deleted: %+v", j)
	}
	if records(t, a) != 1 || !r.Known(migrate) {
		t.Fatal("no record kept")
	}
	var waits []time.Duration
	for look := 0; look < BlockedAfter+1; look++ {
		before := a.total()
		after, handled, err := r.Resume(ctx, migrate)
		if err != nil || !handled {
			t.Fatalf("look %d: Resume() = %v, %v", look, handled, err)
		}
		if n := a.total() - before; n > 3 { // the record, the Job (and the Job for the Event)
			t.Errorf("look %d cost %d requests", look, n)
		}
		waits = append(waits, after)
		before = a.total()
		if again, handled, _ := r.Resume(ctx, migrate); !handled || again != after || a.total() != before {
			t.Errorf("look %d again within the backoff: %s, %d requests", look, again, a.total()-before)
		}
		c.add(after)
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 64}
	for i := range want {
		if waits[i] != want[i]*time.Second {
			t.Errorf("waits %v, want %v seconds", waits, want)
			break
		}
	}
	if len(rec.Events) != 1 || !strings.Contains(<-rec.Events, ReasonRecreateBlocked) {
		t.Errorf("want one RecreateBlocked Event")
	}

	// The tenant's finalizer goes: the Job is gone, and the next look
	// creates it.
	cur := jobNow(t, a)
	cur.Finalizers = nil
	if err := a.WithWatch.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	if jobNow(t, a) != nil {
		t.Fatal("the old Job is not gone")
	}
	if _, handled, err := r.Resume(ctx, migrate); handled || err != nil {
		t.Fatalf("Resume() = %v, %v; want done", handled, err)
	}
	j := jobNow(t, a)
	if j == nil || j.Annotations[RecreatedFromAnnotation] != "uid-old" || len(j.Finalizers) != 0 {
		t.Fatalf("the new Job: %+v", j)
	}
	if a.calls("create Job") != 1 || records(t, a) != 0 || r.Known(migrate) {
		t.Errorf("created %d times, %d records left", a.calls("create Job"), records(t, a))
	}
}

// TestRecreatorStopping: the context of the reconcile is cancelled (watcher
// stops) as the delete is answered: the Job is still created, at once.
func TestRecreatorStopping(t *testing.T) {
	a := newAPIServer(oldJob())
	r, _ := newTestRecreator(a, &clock{t: time.Unix(1e9, 0)})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	a.after = func(verb string, obj client.Object) {
		if verb == "delete" {
			stop()
		}
	}
	out, created, err := r.Begin(ctx, jobNow(t, a), newJob(), nil)
	if err != nil || out != Recreated || created == nil {
		t.Fatalf("Begin() = %v, %v, %v; want Recreated", out, created, err)
	}
	if j := jobNow(t, a); j == nil || j.UID == "uid-old" || len(j.Finalizers) != 0 || records(t, a) != 0 {
		t.Errorf("the new Job: %+v; %d records", j, records(t, a))
	}
}

// TestRecreatorCreatedOnce: whatever stops a re-creation half-way, the
// next replica (or process) finishes it from the record, and the Job is
// created once:
//
//	stopped after                the new Job meanwhile          next replica
//	the delete (create fails)    -                              creates it
//	the create (mark fails)      removed (ttlSecondsAfter-      marks, releases:
//	                             Finished): held by watcher's   it goes; never
//	                             finalizer                      created again
//	the create (mark fails)      runs                           marks, releases
func TestRecreatorCreatedOnce(t *testing.T) {
	for _, tt := range []struct {
		name      string
		failOn    string // the request refused, once
		removeNew bool
		wantJob   bool
	}{
		{"stopped before the create", "create Job", false, true},
		{"stopped before the mark, new Job removed", "patch ConfigMap", true, false},
		{"stopped before the mark", "patch ConfigMap", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			a := newAPIServer(oldJob())
			failed := false
			a.fail = func(verb string, obj client.Object) error {
				if !failed && verb+" "+typeName(obj) == tt.failOn {
					failed = true
					return errors.New("connection refused")
				}
				return nil
			}
			first, _ := newTestRecreator(a, &clock{t: time.Unix(1e9, 0)})
			if out, _, err := first.Begin(ctx, jobNow(t, a), newJob(), nil); out != Pending || err != nil {
				t.Fatalf("Begin() = %v, %v; want Pending", out, err)
			}
			if tt.removeNew {
				if err := a.WithWatch.Delete(ctx, jobNow(t, a)); err != nil {
					t.Fatal(err)
				}
				if j := jobNow(t, a); j == nil || j.DeletionTimestamp == nil {
					t.Fatal("the new Job is not held by watcher's finalizer")
				}
			}
			// The next replica: it knows nothing but the cluster.
			next, _ := newTestRecreator(a, &clock{t: time.Unix(1e9, 0)})
			if err := next.List(ctx); err != nil {
				t.Fatal(err)
			}
			if got := len(next.Wakes()); got != 1 {
				t.Fatalf("List woke %d Jobs", got)
			}
			if _, handled, err := next.Resume(ctx, migrate); handled || err != nil {
				t.Fatalf("Resume() = %v, %v; want done", handled, err)
			}
			j := jobNow(t, a)
			if (j != nil) != tt.wantJob || (j != nil && (j.UID == "uid-old" || len(j.Finalizers) != 0)) {
				t.Errorf("the Job now: %+v, want one: %v", j, tt.wantJob)
			}
			if a.calls("create Job") != 1 || records(t, a) != 0 { // a refused request is not counted
				t.Errorf("%d creates sent, %d records left", a.calls("create Job"), records(t, a))
			}
			// The first replica looks again: nothing to do.
			if _, handled, err := first.Resume(ctx, migrate); handled || err != nil {
				t.Errorf("first replica: Resume() = %v, %v", handled, err)
			}
		})
	}
}

// TestRecreatorChangedJob: a Job changed since it was read (another
// resourceVersion) is not deleted: Begin returns the conflict and removes
// its record; a record whose Job is already taken by another Job (a GitOps
// tool re-applied it) creates nothing.
func TestRecreatorChangedJob(t *testing.T) {
	ctx := context.Background()
	a := newAPIServer(oldJob())
	r, _ := newTestRecreator(a, &clock{t: time.Unix(1e9, 0)})
	stale := jobNow(t, a)
	stale.ResourceVersion = "6"
	if _, _, err := r.Begin(ctx, stale, newJob(), nil); !apierrors.IsConflict(err) {
		t.Errorf("Begin() = %v, want a conflict", err)
	}
	if j := jobNow(t, a); j == nil || j.UID != "uid-old" || j.DeletionTimestamp != nil || records(t, a) != 0 {
		t.Errorf("the Job: %+v; %d records", j, records(t, a))
	}
	// Nothing is in progress: the next decision restarts the Job again
	// (a Job whose status changed between the read and the delete).
	if key := (types.NamespacedName{Namespace: stale.Namespace, Name: stale.Name}); r.Known(key) {
		t.Errorf("Known(%s) after a refused delete, want false", key)
	}

	// A record left by a process that stopped after the delete; someone
	// else created a Job of that name meanwhile.
	rc := NewRecreation(jobNow(t, a), newJob(), nil)
	cm, err := rc.Record("watcher")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.WithWatch.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := a.WithWatch.Delete(ctx, jobNow(t, a)); err != nil {
		t.Fatal(err)
	}
	if err := a.WithWatch.Create(ctx, newJob()); err != nil {
		t.Fatal(err)
	}
	theirs := jobNow(t, a).UID
	if _, handled, err := r.Resume(ctx, migrate); handled || err != nil {
		t.Fatalf("Resume() = %v, %v", handled, err)
	}
	if j := jobNow(t, a); j.UID != theirs || records(t, a) != 0 {
		t.Errorf("the Job %s, want theirs %s; %d records", j.UID, theirs, records(t, a))
	}
}
