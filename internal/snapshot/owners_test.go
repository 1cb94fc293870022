package snapshot

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/pin"
)

var (
	bg     = context.Background()
	sign   = hash.NewHasher([]byte("0123456789abcdef0123456789abcdef")).MAC
	now    = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	web    = metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "w1", Controller: ptr.To(true)}
	rsOld  = metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-old", UID: "rs-old"}
	rsNew  = metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-new", UID: "rs-new"}
	snapX  = "app-pin-00000000000000000001"
	snapY  = "app-pin-00000000000000000002"
	snapZ  = "db-pin-00000000000000000003"
	appSrc = pin.Source{Kind: pin.ConfigMap, Name: "app"}
	dbSrc  = pin.Source{Kind: pin.ConfigMap, Name: "db"}
)

// template is a pod template pinning p, signed (or not).
func template(p pin.Pins, signed bool, hashLabel string) corev1.PodTemplateSpec {
	t := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{
		Labels:      map[string]string{"app": "web", pin.PinnedLabel: "true"},
		Annotations: map[string]string{pin.PinsAnnotation: p.String()}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}
	if signed {
		t.Annotations[pin.SignatureAnnotation] = p.Sign("ns", sign)
	}
	if hashLabel != "" {
		t.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = hashLabel
	}
	return t
}

func deploymentOf(t corev1.PodTemplateSpec) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "w1"}, Spec: appsv1.DeploymentSpec{Template: t}}
}

// replicaSet is a revision of web made an hour ago.
func replicaSet(ref metav1.OwnerReference, t corev1.PodTemplateSpec) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: ref.Name, UID: ref.UID,
		CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
		Labels:            map[string]string{pin.PinnedLabel: "true"}, OwnerReferences: []metav1.OwnerReference{web}},
		Spec: appsv1.ReplicaSetSpec{Template: t}}
}

func snapshotCM(name, of string, age time.Duration, owners ...metav1.OwnerReference) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
		Labels: map[string]string{pin.SnapshotLabel: "true"}, Annotations: map[string]string{pin.SnapshotOf: "configmap/" + of},
		CreationTimestamp: metav1.NewTime(now.Add(-age)), OwnerReferences: owners}, Immutable: ptr.To(true)}
}

// world is a fake API server and an Owners whose watches hold what it
// holds (refresh), counting the GETs.
type world struct {
	c    client.Client
	o    *Owners
	gets atomic.Int32
}

func newWorld(t *testing.T, objs ...client.Object) *world {
	t.Helper()
	w := &world{}
	w.c = interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).Build(), interceptor.Funcs{
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			w.gets.Add(1)
			return cl.Get(ctx, key, obj, opts...)
		},
	})
	w.o = &Owners{Client: w.c, Fresh: w.c, Sign: sign, Now: func() time.Time { return now }, Grace: 10 * time.Minute}
	w.refresh(t)
	return w
}

// refresh fills the Owners' watches from the fake API server.
func (w *world) refresh(t *testing.T) {
	t.Helper()
	var rss appsv1.ReplicaSetList
	var cms corev1.ConfigMapList
	if err := w.c.List(bg, &rss); err != nil {
		t.Fatal(err)
	}
	if err := w.c.List(bg, &cms); err != nil {
		t.Fatal(err)
	}
	inf := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, &metav1.PartialObjectMetadata{}, 0,
		toolscache.Indexers{byUID: revisionUID, byController: controllerUID})
	for _, rs := range rss.Items {
		_ = inf.GetIndexer().Add(&metav1.PartialObjectMetadata{ObjectMeta: rs.ObjectMeta})
	}
	st := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{byOwner: ownerUIDs})
	for _, cm := range cms.Items {
		if cm.Labels[pin.SnapshotLabel] != "" {
			_ = st.Add(&metav1.PartialObjectMetadata{ObjectMeta: cm.ObjectMeta})
		}
	}
	w.o.revisions = []revisionWatch{{resource: "replicasets", inf: inf}}
	w.o.snapshots = map[string][]snapStore{pin.ConfigMap: {{store: st, synced: func() bool { return true }}}}
}

// owners names the owners of the ConfigMap name.
func (w *world) owners(t *testing.T, name string) string {
	t.Helper()
	var cm corev1.ConfigMap
	if err := w.c.Get(bg, client.ObjectKey{Namespace: "ns", Name: name}, &cm); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range cm.OwnerReferences {
		out = append(out, r.Name)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// TestHandOver: a revision takes the snapshots its template pins; the
// workload loses them only to the revision made from its current
// template; a snapshot the workload owns alone past the grace goes with
// its current revision; pins watcher did not sign are not acted on.
func TestHandOver(t *testing.T) {
	pinsOld := pin.Pins{appSrc: snapX}
	pinsNew := pin.Pins{appSrc: snapX, dbSrc: snapZ} // a restart that reused X
	for _, tc := range []struct {
		name    string
		current corev1.PodTemplateSpec // the Deployment's
		rs      *appsv1.ReplicaSet     // handed
		snaps   []client.Object
		want    map[string]string // snapshot: owners
		queued  int
	}{
		{
			name:    "the new revision takes its snapshots from the workload",
			current: template(pinsNew, true, ""),
			rs:      replicaSet(rsNew, template(pinsNew, true, "h2")),
			snaps:   []client.Object{snapshotCM(snapX, "app", time.Hour, rsOld, web), snapshotCM(snapZ, "db", time.Minute, web)},
			want:    map[string]string{snapX: "web-new,web-old", snapZ: "web-new"},
		},
		{
			name:    "a new revision younger than the grace: the workload keeps them (a restart may be in flight), handed again later",
			current: template(pinsNew, true, ""),
			rs: func() *appsv1.ReplicaSet {
				rs := replicaSet(rsNew, template(pinsNew, true, "h2"))
				rs.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute))
				return rs
			}(),
			snaps:  []client.Object{snapshotCM(snapX, "app", time.Hour, rsOld, web), snapshotCM(snapZ, "db", time.Minute, web)},
			want:   map[string]string{snapX: "web,web-new,web-old", snapZ: "web,web-new"},
			queued: 1,
		},
		{
			name:    "an old revision does not take a snapshot from the workload (restart in flight, paused rollout)",
			current: template(pinsNew, true, ""),
			rs:      replicaSet(rsOld, template(pinsOld, true, "h1")),
			snaps:   []client.Object{snapshotCM(snapX, "app", time.Hour, web)},
			want:    map[string]string{snapX: "web,web-old"},
		},
		{
			name: "an old revision with the same pins but another template does not either",
			current: func() corev1.PodTemplateSpec {
				t := template(pinsOld, true, "")
				t.Spec.Containers[0].Image = "app:2"
				return t
			}(),
			rs:    replicaSet(rsOld, template(pinsOld, true, "h1")),
			snaps: []client.Object{snapshotCM(snapX, "app", time.Hour, web)},
			want:  map[string]string{snapX: "web,web-old"},
		},
		{
			name:    "pins not signed by watcher are not acted on",
			current: template(pinsNew, false, ""),
			rs:      replicaSet(rsNew, template(pinsNew, false, "h2")),
			snaps:   []client.Object{snapshotCM(snapX, "app", time.Hour, web)},
			want:    map[string]string{snapX: "web"},
		},
		{
			name:    "a snapshot the workload owns alone past the grace, not pinned, goes with the current revision",
			current: template(pinsOld, true, ""),
			rs:      replicaSet(rsNew, template(pinsOld, true, "h2")),
			snaps:   []client.Object{snapshotCM(snapX, "app", time.Hour, web), snapshotCM(snapY, "app", 11*time.Minute, web)},
			want:    map[string]string{snapX: "web-new", snapY: "web-new"},
		},
		{
			name:    "within the grace it stays the workload's",
			current: template(pinsOld, true, ""),
			rs:      replicaSet(rsNew, template(pinsOld, true, "h2")),
			snaps:   []client.Object{snapshotCM(snapX, "app", time.Hour, web), snapshotCM(snapY, "app", 9*time.Minute, web)},
			want:    map[string]string{snapX: "web-new", snapY: "web"},
		},
		{
			name:    "an old revision never takes what the workload owns alone",
			current: template(pinsNew, true, ""),
			rs:      replicaSet(rsOld, template(pinsOld, true, "h1")),
			snaps:   []client.Object{snapshotCM(snapX, "app", time.Hour, rsOld), snapshotCM(snapY, "app", time.Hour, web)},
			want:    map[string]string{snapX: "web-old", snapY: "web"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, append(tc.snaps, deploymentOf(tc.current), tc.rs)...)
			q := newRecorded()
			defer q.ShutDown()
			w.o.q = q
			uid, err := w.o.hand(bg, revision{resource: "replicasets", namespace: "ns", name: tc.rs.Name})
			if err != nil || uid != tc.rs.UID {
				t.Fatalf("hand = %q, %v", uid, err)
			}
			for name, want := range tc.want {
				if got := w.owners(t, name); got != want {
					t.Errorf("owners of %s = %s, want %s", name, got, want)
				}
			}
			var again int
			for _, r := range q.later {
				if r.resource == "replicasets" && r.name == tc.rs.Name && r.uid == "" {
					again++
				}
			}
			if again != tc.queued {
				t.Errorf("handed again later %d times, want %d (queued later: %v)", again, tc.queued, q.later)
			}
		})
	}
}

// TestHandOverCost: a revision's pins cost no API request for what is not
// watcher's: more than pin.MaxPins entries, unsigned, or entries not named
// as their source's snapshot. Only signed snapshot names the watch does
// not hold yet are read.
func TestHandOverCost(t *testing.T) {
	pins := func(n int, name func(i int) string) pin.Pins {
		p := pin.Pins{}
		for i := range n {
			p[pin.Source{Kind: pin.ConfigMap, Name: fmt.Sprintf("c%d", i)}] = name(i)
		}
		return p
	}
	shaped := func(i int) string { return fmt.Sprintf("c%d-pin-00000000000000000000", i) }
	for _, tc := range []struct {
		name     string
		template corev1.PodTemplateSpec
		cached   bool
		want     int32
	}{
		{"5,000 entries", template(pins(5000, shaped), true, ""), false, 1},
		{"unsigned", template(pins(100, shaped), false, ""), false, 1},
		{"names that are not snapshots' names", template(pins(100, func(i int) string { return fmt.Sprintf("other%d", i) }), true, ""), false, 1},
		{"watcher's pins, snapshots in the watch", template(pins(100, shaped), true, ""), true, 1},
		{"watcher's pins, snapshots made just now", template(pins(3, shaped), true, ""), false, 1 + 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []client.Object
			if tc.cached {
				for i := range 100 {
					objs = append(objs, snapshotCM(shaped(i), fmt.Sprintf("c%d", i), time.Hour, rsNew))
				}
			}
			w := newWorld(t, append(objs, replicaSet(rsNew, tc.template))...)
			w.gets.Store(0)
			if _, err := w.o.hand(bg, revision{resource: "replicasets", namespace: "ns", name: rsNew.Name}); err != nil {
				t.Fatal(err)
			}
			if got := w.gets.Load(); got != tc.want {
				t.Errorf("GETs = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestHandBack: a snapshot that the workload owns besides one of its
// revisions is handed to that revision again: the workload loses it only
// if that revision is its current one. One its workload owns alone is
// looked at again after the grace, by handing the workload's revisions.
func TestHandBack(t *testing.T) {
	p := pin.Pins{appSrc: snapX}
	other := pin.Pins{appSrc: snapY}
	for _, tc := range []struct {
		name    string
		current corev1.PodTemplateSpec
		snap    *corev1.ConfigMap
		want    string
		queued  int
	}{
		{"owned by the current revision: the workload lets go", template(p, true, ""), snapshotCM(snapX, "app", time.Hour, rsOld, web), "web-old", 0},
		{"owned by an old revision, pinned by the current template: the workload keeps it (the review's case)",
			template(pin.Pins{appSrc: snapX, {Kind: pin.ConfigMap, Name: "db"}: "db-pin-00000000000000000000"}, true, ""), snapshotCM(snapX, "app", time.Hour, rsOld, web), "web,web-old", 0},
		{"owned by an old revision, not pinned by the current template: it goes with the revisions", template(other, true, ""), snapshotCM(snapX, "app", time.Hour, rsOld, web), "web-old", 0},
		{"owned by the workload alone, within the grace: looked at later", template(other, true, ""), snapshotCM(snapX, "app", time.Minute, web), "web", 0},
		{"owned by the workload alone, past the grace: its revisions handed again", template(other, true, ""), snapshotCM(snapX, "app", time.Hour, web), "web", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.snap, deploymentOf(tc.current), replicaSet(rsOld, template(p, true, "h1")))
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[revision]())
			defer q.ShutDown()
			w.o.q = q
			if _, err := w.o.hand(bg, revision{resource: "configmaps", namespace: "ns", name: tc.snap.Name}); err != nil {
				t.Fatal(err)
			}
			if got := w.owners(t, tc.snap.Name); got != tc.want {
				t.Errorf("owners = %s, want %s", got, tc.want)
			}
			if q.Len() != tc.queued {
				t.Errorf("queued %d, want %d", q.Len(), tc.queued)
			}
		})
	}
}

// TestSameTemplate: a revision is made from its workload's template when
// they are the same, hash labels aside; without the spec compared (a
// custom resource's template is not defaulted), labels and annotations.
func TestSameTemplate(t *testing.T) {
	p := pin.Pins{appSrc: snapX}
	image := func(t corev1.PodTemplateSpec, i string) corev1.PodTemplateSpec {
		t.Spec.Containers[0].Image = i
		return t
	}
	for _, tc := range []struct {
		name   string
		w, rev corev1.PodTemplateSpec
		spec   bool
		want   bool
	}{
		{"same, with the hash label", template(p, true, ""), template(p, true, "h1"), true, true},
		{"other pins", template(pin.Pins{appSrc: snapY}, true, ""), template(p, true, "h1"), true, false},
		{"other image", image(template(p, true, ""), "app:2"), template(p, true, "h1"), true, false},
		{"other image, spec not compared", image(template(p, true, ""), "app:2"), template(p, true, "h1"), false, true},
	} {
		if got := sameTemplate(tc.w, tc.rev, tc.spec); got != tc.want {
			t.Errorf("%s: sameTemplate = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestHas: whether a snapshot exists is known once the snapshots' watch
// of its namespace has synced.
func TestHas(t *testing.T) {
	st := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	_ = st.Add(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: snapX, Labels: map[string]string{pin.SnapshotLabel: "true"}}})
	synced := false
	o := &Owners{snapshots: map[string][]snapStore{pin.ConfigMap: {{namespace: "ns", store: st, synced: func() bool { return synced }}}}}
	for _, tc := range []struct {
		name, ns, kind, snap string
		synced               bool
		exists, known        bool
	}{
		{"not synced", "ns", pin.ConfigMap, snapX, false, false, false},
		{"there", "ns", pin.ConfigMap, snapX, true, true, true},
		{"not there", "ns", pin.ConfigMap, snapY, true, false, true},
		{"a namespace not watched", "other", pin.ConfigMap, snapX, true, false, false},
		{"a kind not watched", "ns", pin.Secret, snapX, true, false, false},
	} {
		synced = tc.synced
		if exists, known := o.Has(tc.ns, tc.kind, tc.snap); exists != tc.exists || known != tc.known {
			t.Errorf("%s: Has = %v, %v, want %v, %v", tc.name, exists, known, tc.exists, tc.known)
		}
	}
}

// TestStored: the budget counts only the sizes watcher signed; what an
// object says of itself counts nothing.
func TestStored(t *testing.T) {
	o := &Owners{Sign: sign}
	obj := func(uid types.UID, name, bytes, mac string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid,
			Annotations: map[string]string{pin.Bytes: bytes, pin.BytesSignature: mac}}}
	}
	for _, m := range []*metav1.PartialObjectMetadata{
		obj("1", snapX, "100", pin.SignBytes("ns", snapX, 100, sign)),     // watcher's: 100
		obj("2", snapY, "2000000", pin.SignBytes("ns", snapX, 100, sign)), // a MAC of another
		obj("3", snapZ, "3000000", ""),                                    // forged, unsigned
		obj("4", "x", "-5000", ""),                                        // negative
		obj("5", "y", "99999999999999999999", ""),                         // huge
	} {
		o.count(m, false)
	}
	if got := o.Stored("ns"); got != 100 {
		t.Errorf("Stored = %d, want 100", got)
	}
	o.count(obj("1", snapX, "100", ""), true)
	if got := o.Stored("ns"); got != 0 {
		t.Errorf("Stored after the delete = %d, want 0", got)
	}
}

// recorded is a queue that records what is added later (AddAfter).
type recorded struct {
	workqueue.TypedRateLimitingInterface[revision]
	later []revision
}

func (r *recorded) AddAfter(item revision, _ time.Duration) { r.later = append(r.later, item) }

func newRecorded() *recorded {
	return &recorded{TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[revision]())}
}

// TestEnqueueSnapshot: a snapshot its workload owns besides one of the
// workload's revisions, or alone, is looked at again later (after the
// grace), never at once; one only revisions own is left alone.
func TestEnqueueSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name   string
		owners []metav1.OwnerReference
		later  int
	}{
		{"workload and its revision", []metav1.OwnerReference{rsOld, web}, 1},
		{"workload alone", []metav1.OwnerReference{web}, 1},
		{"revisions only", []metav1.OwnerReference{rsOld}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, replicaSet(rsOld, template(pin.Pins{appSrc: snapX}, true, "h1")))
			q := newRecorded()
			defer q.ShutDown()
			snap := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: snapX, OwnerReferences: tc.owners,
				CreationTimestamp: metav1.NewTime(now)}}
			w.o.enqueueSnapshot(q, "configmaps", snap)
			if len(q.later) != tc.later || q.Len() != 0 {
				t.Errorf("later %v, now %d; want %d later, none now", q.later, q.Len(), tc.later)
			}
		})
	}
}
