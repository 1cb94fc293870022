package controller

import (
	"context"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/watcher-dev/watcher/internal/evict"
	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/lock"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/policy"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/settings"
	"github.com/watcher-dev/watcher/internal/snapshot"
	"github.com/watcher-dev/watcher/internal/store"
)

// pinScene is a pinned Deployment web reading ConfigMap cfg, whose record
// and template pins are those of cfg at "v1"; cfg is now at now, with
// cfgAnn; the snapshot of "v1" exists (its revision still kept).
type pinScene struct {
	now            string
	cfgAnn         map[string]string
	depAnn, tmpAnn map[string]string
	depLabels      map[string]string
	configSelector string
	// extraPins, when set, are pinned by the template besides cfg (a
	// rollback to another revision).
	templatePins pin.Pins
	extra        []client.Object
	// other, when set, is a second ConfigMap the pods read, recorded at
	// "o1" and now at other.
	other string
	// getErr, when set, fails the API server's reads it returns an error for.
	getErr func(obj client.Object) error
	// noSnapshot: the snapshot of v1 does not exist.
	noSnapshot bool
	// view, when set, is the controller's view of every snapshot.
	view SnapshotView
	// onGet, when set, is told of every read of the store.
	onGet func(kind, namespace, name string)
}

// pinnedBefore is a snapshot view that has seen a pinned revision of
// every workload, and asks the API server for snapshots.
type pinnedBefore struct{}

func (pinnedBefore) Has(ns, kind, name string) (bool, bool)             { return false, false }
func (pinnedBefore) PinnedBefore(ns string, uid types.UID) (bool, bool) { return true, true }

var reviewHasher = hash.NewHasher([]byte("0123456789abcdef0123"))

func cfgDigest(v string) hash.Digest {
	return reviewHasher.Of(hash.Source{Kind: "ConfigMap", Namespace: "ns", Name: "cfg"}, map[string][]byte{"a": []byte(v)})
}

func snapshotOf(v string, labels map[string]string) *corev1.ConfigMap {
	d := cfgDigest(v)
	l := map[string]string{pin.SnapshotLabel: "true"}
	for k, x := range labels {
		l[k] = x
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: pin.SnapshotName("cfg", d.Sum), Labels: l,
		Annotations: map[string]string{pin.SnapshotOf: "configmap/cfg"}}, Immutable: ptr.To(true), Data: map[string]string{"a": v}}
}

func (s pinScene) setUp(t *testing.T, ctx context.Context) (*Reconciler, client.Client, *events.FakeRecorder) {
	t.Helper()
	old := cfgDigest("v1")
	cfgSrc := pin.Source{Kind: pin.ConfigMap, Name: "cfg"}
	pins := s.templatePins
	if pins == nil {
		pins = pin.Pins{cfgSrc: pin.SnapshotName("cfg", old.Sum)}
	}
	recorded := plan.Record{"ConfigMap/cfg": &plan.Entry{All: true, Keys: old.Keys}}
	depAnn := map[string]string{plan.RecordAnnotation: recorded.String(), plan.HashKeyAnnotation: reviewHasher.ID(), pin.Annotation: "true"}
	for k, v := range s.depAnn {
		depAnn[k] = v
	}
	tmpAnn := map[string]string{pin.PinsAnnotation: pins.String()}
	for k, v := range s.tmpAnn {
		tmpAnn[k] = v
	}
	depLabels := map[string]string{pin.RevisionLabel: pin.Pins{cfgSrc: pin.SnapshotName("cfg", old.Sum)}.Digest(), "app": "web"}
	for k, v := range s.depLabels {
		depLabels[k] = v
	}
	envFrom := []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}
	if s.other != "" {
		envFrom = append(envFrom, corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "other"}}})
		recorded["ConfigMap/other"] = &plan.Entry{All: true, Keys: reviewHasher.Of(hash.Source{Kind: "ConfigMap", Namespace: "ns", Name: "other"}, map[string][]byte{"a": []byte("o1")}).Keys}
		if _, set := s.depAnn[plan.RecordAnnotation]; !set {
			depAnn[plan.RecordAnnotation] = recorded.String()
		}
		s.extra = append(s.extra, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other", ResourceVersion: "6"}, Data: map[string]string{"a": s.other}})
	}
	dep := &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1", ResourceVersion: "7", Generation: 2,
			Labels: depLabels, Annotations: depAnn},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{pin.PinnedLabel: "true"}, Annotations: tmpAnn},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", EnvFrom: envFrom}}}}},
	}
	cfgLabels := map[string]string{}
	if s.configSelector != "" {
		k, v, _ := strings.Cut(s.configSelector, "=")
		cfgLabels[k] = v
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg", ResourceVersion: "5", Labels: cfgLabels, Annotations: s.cfgAnn},
		Data: map[string]string{"a": s.now}}
	objs := append([]client.Object{dep, cm}, s.extra...)
	if !s.noSnapshot {
		objs = append(objs, snapshotOf("v1", nil))
	}
	cs := kubefake.NewClientset()
	for _, o := range objs {
		switch o := o.(type) {
		case *appsv1.Deployment:
			_, _ = cs.AppsV1().Deployments("ns").Create(ctx, o.DeepCopy(), metav1.CreateOptions{})
		case *corev1.ConfigMap:
			_, _ = cs.CoreV1().ConfigMaps("ns").Create(ctx, o.DeepCopy(), metav1.CreateOptions{})
		}
	}
	st, err := store.New(cs, store.Options{OnGet: s.onGet, Hasher: reviewHasher, ConfigSelector: s.configSelector,
		WorkloadAnnotations: append([]string{"require-restart", plan.RecordAnnotation, plan.HashKeyAnnotation, plan.VersionAnnotation,
			restart.StrategyAnnotation, guard.PriorityAnnotation, guard.ReleaseAnnotation, guard.StateAnnotation, guard.PendingAnnotation, evict.DoneAnnotation}, optin.WorkloadKeys...),
		ConfigAnnotations: append([]string{"require-restart", guard.ReleaseAnnotation}, optin.ConfigKeys...)})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = st.Start(ctx) }()
	if !toolscache.WaitForCacheSync(ctx.Done(), st.HasSynced) {
		t.Fatal("store did not sync")
	}
	b := fake.NewClientBuilder().WithScheme(scheme.Scheme)
	for _, o := range objs {
		b = b.WithObjects(o.DeepCopyObject().(client.Object))
	}
	api := b.WithObjects(
		&admissionv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "watcher-pins"}},
		&admissionv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "watcher-pins"}},
	).Build()
	if s.getErr != nil {
		inner := api
		api = interceptor.NewClient(inner, interceptor.Funcs{
			Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if err := s.getErr(obj); err != nil {
					return err
				}
				return cl.Get(ctx, key, obj, opts...)
			},
		})
	}
	rec := events.NewFakeRecorder(100)
	maker := &snapshot.Maker{Client: api, Fresh: api, Hasher: reviewHasher, Policy: "watcher-pins"}
	r := New(st, api, api, rec, Config{Settings: settings.Settings{Annotation: "require-restart", Discovery: plan.DiscoveryAll},
		Hasher: reviewHasher, Snapshots: maker, SnapshotView: s.view})
	return r, api, rec
}

func drain(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func reconcileWeb(t *testing.T, ctx context.Context, r *Reconciler) {
	t.Helper()
	if _, err := r.Reconcile(ctx, Workload{object.Ref{Kind: "Deployment", Namespace: "ns", Name: "web"}}); err != nil {
		t.Fatal(err)
	}
}

// TestPinReleaseKeepsOldPins: a pinned workload whose template and
// ConfigMap are of the same change set (one helm upgrade changing the
// image and the config together) is not restarted (verdict.InRelease),
// and its record is brought to the new content; its template must then
// pin that content too (Helm's three-way merge and server-side apply keep
// watcher's pins), or the release's pods would read the old snapshot for
// good. (Review finding: the old pins were kept.)
func TestPinReleaseKeepsOldPins(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, api, rec := pinScene{
		now:    "v2",
		cfgAnn: map[string]string{optin.ChangeSet: "8"},
		depAnn: map[string]string{optin.RecordedChangeSet: "7"},
		tmpAnn: map[string]string{optin.ChangeSet: "8"},
	}.setUp(t, ctx)
	reconcileWeb(t, ctx, r)
	var got appsv1.Deployment
	if err := api.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "web"}, &got); err != nil {
		t.Fatal(err)
	}
	rc, _ := plan.ParseRecord(got.Annotations[plan.RecordAnnotation])
	newSum := cfgDigest("v2")
	recordedNew := rc["ConfigMap/cfg"] != nil && rc["ConfigMap/cfg"].Equal(&plan.Entry{All: true, Keys: newSum.Keys})
	pinsNow := pin.Parse(got.Spec.Template.Annotations[pin.PinsAnnotation])[pin.Source{Kind: pin.ConfigMap, Name: "cfg"}]
	t.Logf("events: %v", drain(rec))
	t.Logf("record is the new content: %v; template pins cfg to %s (old snapshot %s, new content's would be %s)",
		recordedNew, pinsNow, pin.SnapshotName("cfg", cfgDigest("v1").Sum), pin.SnapshotName("cfg", newSum.Sum))
	if !recordedNew || pinsNow != pin.SnapshotName("cfg", newSum.Sum) {
		t.Errorf("the release recorded cfg at v2 (%v); its template must pin v2's snapshot, pins %s", recordedNew, pinsNow)
	}
}

// TestPinRollbackUnderConfigSelector: whether a snapshot exists is decided
// from what sees every snapshot (the API server, or snapshot.Owners),
// never from the store, which --config-selector filters: a native
// rollback (the template pins the snapshot of v1, the label names v2's
// revision) is recorded (RolledBack), never rolled forward, with or
// without a selector. (Review finding: rolled forward with a selector.)
func TestPinRollbackUnderConfigSelector(t *testing.T) {
	for _, sel := range []string{"", "reload=true"} {
		t.Run("selector="+sel, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cfgSrc := pin.Source{Kind: pin.ConfigMap, Name: "cfg"}
			v2 := cfgDigest("v2")
			// watcher last wrote the revision of v2 (its label); the undo brought
			// back the template pinning v1; cfg is at v2, recorded at v2.
			rev2 := pin.Pins{cfgSrc: pin.SnapshotName("cfg", v2.Sum)}
			r, api, rec := pinScene{
				now:            "v2",
				configSelector: sel,
				depLabels:      map[string]string{pin.RevisionLabel: rev2.Digest()},
				depAnn:         map[string]string{plan.RecordAnnotation: plan.Record{"ConfigMap/cfg": &plan.Entry{All: true, Keys: v2.Keys}}.String()},
				extra:          []client.Object{snapshotOf("v2", nil)},
			}.setUp(t, ctx)
			reconcileWeb(t, ctx, r)
			var got appsv1.Deployment
			if err := api.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "web"}, &got); err != nil {
				t.Fatal(err)
			}
			evs := drain(rec)
			pinsNow := pin.Parse(got.Spec.Template.Annotations[pin.PinsAnnotation])[cfgSrc]
			t.Logf("events: %v", evs)
			t.Logf("template pins cfg to %s (v1's %s, v2's %s); rolled-back-from %q",
				pinsNow, pin.SnapshotName("cfg", cfgDigest("v1").Sum), rev2[cfgSrc], got.Annotations[pin.RolledBackFrom])
			rolledForward := pinsNow == rev2[cfgSrc]
			if rolledForward || got.Annotations[pin.RolledBackFrom] == "" {
				t.Errorf("with --config-selector %q the rollback was rolled forward to v2, or not recorded (events %v)", sel, evs)
			}
		})
	}
}

// TestPinOptedOutSourceFloats: a ConfigMap annotated require-restart:
// "false" (its changes restart nothing) floats: a restart for another
// source does not pin it; and if the template pins it from before, its
// change restarts once with it unpinned, so that it reaches the pods.
// (Review finding: it was pinned, and its changes never reached them.)
func TestPinOptedOutSourceFloats(t *testing.T) {
	if why := pin.Floats(pin.ConfigMap, "", map[string]string{"require-restart": "false"}); why != "" {
		t.Skipf("floats: %s", why)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// First: a change of the other ConfigMap restarts the workload, which
	// was not pinned yet: every source is pinned, the opted-out one too.
	first, api0, _ := pinScene{now: "v1", other: "o2", cfgAnn: map[string]string{"require-restart": "false"},
		templatePins: pin.Pins{}, depLabels: map[string]string{pin.RevisionLabel: ""}}.setUp(t, ctx)
	reconcileWeb(t, ctx, first)
	var d0 appsv1.Deployment
	if err := api0.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "web"}, &d0); err != nil {
		t.Fatal(err)
	}
	t.Logf("after a restart for ConfigMap other: pins %q", d0.Spec.Template.Annotations[pin.PinsAnnotation])
	if _, ok := pin.Parse(d0.Spec.Template.Annotations[pin.PinsAnnotation])[pin.Source{Kind: pin.ConfigMap, Name: "cfg"}]; ok {
		t.Errorf("the opted-out ConfigMap was pinned")
	}
	// Then: pinned before it was opted out (an older watcher, or an
	// annotation added later), it changes.
	// Then: the opted-out ConfigMap changes.
	r, api, rec := pinScene{now: "v2", cfgAnn: map[string]string{"require-restart": "false"}}.setUp(t, ctx)
	reconcileWeb(t, ctx, r)
	var got appsv1.Deployment
	if err := api.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "web"}, &got); err != nil {
		t.Fatal(err)
	}
	pinsNow := pin.Parse(got.Spec.Template.Annotations[pin.PinsAnnotation])[pin.Source{Kind: pin.ConfigMap, Name: "cfg"}]
	_, restarted := got.Spec.Template.Annotations[plan.RestartAnnotation]
	t.Logf("events %v; restarted %v; template pins cfg to %s (v1's)", drain(rec), restarted, pinsNow)
	if !restarted || pinsNow != "" {
		t.Errorf("the opted-out ConfigMap changed to v2 and its pods stay on the snapshot of v1 (restarted %v, pins %q)", restarted, pinsNow)
	}
}

// TestPinTransientErrorRetried: only NotFound of the admission policy
// turns pinning off; a 503 on its read is returned, to try again, and
// the template keeps its pins. (Review finding: a 503 unpinned the
// restart.)
func TestPinTransientErrorRetried(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, api, rec := pinScene{now: "v2", getErr: func(obj client.Object) error {
		if _, ok := obj.(*admissionv1.MutatingAdmissionPolicy); ok {
			return apierrors.NewServiceUnavailable("etcd leader changed")
		}
		return nil
	}}.setUp(t, ctx)
	if _, err := r.Reconcile(ctx, Workload{object.Ref{Kind: "Deployment", Namespace: "ns", Name: "web"}}); err == nil {
		t.Errorf("a 503 on the policy's read was not returned, to try again")
	}
	var got appsv1.Deployment
	if err := api.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "web"}, &got); err != nil {
		t.Fatal(err)
	}
	_, restarted := got.Spec.Template.Annotations[plan.RestartAnnotation]
	t.Logf("events %v", drain(rec))
	t.Logf("restarted %v; pins %q; pinned label %q; revision label %q", restarted, got.Spec.Template.Annotations[pin.PinsAnnotation],
		got.Spec.Template.Labels[pin.PinnedLabel], got.Labels[pin.RevisionLabel])
	if restarted || got.Spec.Template.Annotations[pin.PinsAnnotation] == "" {
		t.Errorf("a 503 on one read of the policy made a pinned workload roll out, or removed its pins")
	}
}

// TestPinHandEditAfterImageOnlyRelease: release 8 changes only the image
// (its ConfigMap re-applied unchanged, carrying watcher.dev/change-set
// "8"): watcher records the template's id as seen although no hash
// changed, so that a later hand edit of the ConfigMap, keeping its id,
// restarts. (Review finding: it was taken for the release, never rolled.)
func TestPinHandEditAfterImageOnlyRelease(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	unpinned := map[string]string{pin.Annotation: "false", optin.RecordedChangeSet: "7"}
	// 1. The release: template at "8", ConfigMap re-applied unchanged with "8".
	r1, api1, _ := pinScene{now: "v1", cfgAnn: map[string]string{optin.ChangeSet: "8"}, depAnn: unpinned,
		tmpAnn: map[string]string{optin.ChangeSet: "8"}, templatePins: pin.Pins{}, depLabels: map[string]string{pin.RevisionLabel: ""}}.setUp(t, ctx)
	reconcileWeb(t, ctx, r1)
	// The ConfigMap's own event (its annotation changed) is handled too.
	if _, err := r1.Reconcile(ctx, Change{object.Ref{Kind: "ConfigMap", Namespace: "ns", Name: "cfg"}}); err != nil {
		t.Fatal(err)
	}
	var d1 appsv1.Deployment
	_ = api1.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "web"}, &d1)
	recorded := d1.Annotations[optin.RecordedChangeSet]
	t.Logf("after the image-only release, %s = %q", optin.RecordedChangeSet, recorded)
	// 2. Later, a hand edit of the ConfigMap, keeping its id.
	r2, api2, rec2 := pinScene{now: "v2", cfgAnn: map[string]string{optin.ChangeSet: "8"},
		depAnn: map[string]string{pin.Annotation: "false", optin.RecordedChangeSet: recorded},
		tmpAnn: map[string]string{optin.ChangeSet: "8"}, templatePins: pin.Pins{}, depLabels: map[string]string{pin.RevisionLabel: ""}}.setUp(t, ctx)
	reconcileWeb(t, ctx, r2)
	var d2 appsv1.Deployment
	_ = api2.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "web"}, &d2)
	_, restarted := d2.Spec.Template.Annotations[plan.RestartAnnotation]
	t.Logf("hand edit: events %v; restarted %v", drain(rec2), restarted)
	if recorded != "8" {
		t.Errorf("the image-only release's id was not recorded as seen")
	}
	if !restarted {
		t.Errorf("a hand edit of the ConfigMap after an image-only release is recorded as carried by the release, and never rolled out")
	}
}

// TestPinEvictRemovesStalePins: a workload pinned by earlier restarts
// whose strategy becomes evict cannot keep pins (eviction never writes the
// template): its restart writes the template once, with the pins removed,
// so that no pod comes back on the old snapshot. (Review finding: the
// evicted pods came back pinned to v1.)
func TestPinEvictRemovesStalePins(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, api, rec := pinScene{now: "v2", depAnn: map[string]string{restart.StrategyAnnotation: "evict"}}.setUp(t, ctx)
	reconcileWeb(t, ctx, r)
	var got appsv1.Deployment
	if err := api.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "web"}, &got); err != nil {
		t.Fatal(err)
	}
	pinsNow := pin.Parse(got.Spec.Template.Annotations[pin.PinsAnnotation])[pin.Source{Kind: pin.ConfigMap, Name: "cfg"}]
	rc, _ := plan.ParseRecord(got.Annotations[plan.RecordAnnotation])
	recordedNew := rc["ConfigMap/cfg"] != nil && rc["ConfigMap/cfg"].Equal(&plan.Entry{All: true, Keys: cfgDigest("v2").Keys})
	t.Logf("events %v", drain(rec))
	t.Logf("record at v2: %v; template still pins cfg to %s (v1's %s)", recordedNew, pinsNow, pin.SnapshotName("cfg", cfgDigest("v1").Sum))
	if !recordedNew || pinsNow != "" || got.Spec.Template.Annotations[plan.RestartAnnotation] == "" {
		t.Errorf("a restart by eviction of a template pinning v1 must write the template once, its pins removed: record at v2 %v, pins %q", recordedNew, pinsNow)
	}
}

// TestPinCurrentPinsToMissingSnapshot: a template whose pins and label
// agree but whose snapshot does not exist (a manifest exported and applied
// to another cluster, a backup restored without its snapshots) is pinned
// again once, with a Warning PinsStripped naming the cause. (Review
// finding: nothing was said or done; its pods could not start.)
func TestPinCurrentPinsToMissingSnapshot(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, api, rec := pinScene{now: "v1", noSnapshot: true}.setUp(t, ctx)
	reconcileWeb(t, ctx, r)
	var got appsv1.Deployment
	if err := api.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "web"}, &got); err != nil {
		t.Fatal(err)
	}
	_, restarted := got.Spec.Template.Annotations[plan.RestartAnnotation]
	evs := drain(rec)
	t.Logf("events %v; restarted %v; pins %q", evs, restarted, got.Spec.Template.Annotations[pin.PinsAnnotation])
	if !restarted || !slices.ContainsFunc(evs, func(e string) bool { return strings.Contains(e, ReasonPinsStripped) }) {
		t.Errorf("not repinned with a Warning: the template pins %s, which does not exist; no Warning, no repin", got.Spec.Template.Annotations[pin.PinsAnnotation])
	}
}

// TestPinReplaceStripsLabelToo: a replace removes the template's pins and
// the workload's revision label together; a pinned revision of the
// workload (snapshot.Owners' PinnedBefore) tells it from a workload never
// pinned: it is pinned again with one rollout and a Warning. (Review
// finding: left floating, silently.)
func TestPinReplaceStripsLabelToo(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, api, rec := pinScene{now: "v1", templatePins: pin.Pins{}, depLabels: map[string]string{pin.RevisionLabel: ""}, view: pinnedBefore{}}.setUp(t, ctx)
	reconcileWeb(t, ctx, r)
	var got appsv1.Deployment
	_ = api.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "web"}, &got)
	_, restarted := got.Spec.Template.Annotations[plan.RestartAnnotation]
	evs := drain(rec)
	t.Logf("after a replace: events %v; restarted %v; pins %q", evs, restarted, got.Spec.Template.Annotations[pin.PinsAnnotation])
	if !restarted || len(evs) == 0 {
		t.Errorf("a pinned workload whose pins and label a replace removed is left floating, silently")
	}
}

// TestPinnedRestartReads: one ConfigMap edit that restarts one pinned
// Deployment reads the changed ConfigMap from the store 6 times: the
// change itself, its users, the gather (the one the decision, the rules
// after it, the guards and the pin writer all use), who wrote it (twice:
// the triage and the Event), and the check that the triage still holds.
// The guards and the pin writer read none (before the verdict chain: 9,
// 3 of them by the guards). The ReloadPolicies are asked once.
func TestPinnedRestartReads(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reads := 0
	r, api, _ := pinScene{now: "v2", onGet: func(kind, ns, name string) {
		if kind == "ConfigMap" && name == "cfg" {
			reads++
		}
	}}.setUp(t, ctx)
	r.Config.Locker = lock.Local{}
	r.Config.Policies = &Policies{Index: policy.NewIndex()}
	lookups, _ := countWalk(t)
	reads = 0
	if _, err := r.Reconcile(ctx, Change{object.Ref{Kind: "ConfigMap", Namespace: "ns", Name: "cfg"}}); err != nil {
		t.Fatal(err)
	}
	var got appsv1.Deployment
	if err := api.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "web"}, &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Template.Annotations[plan.RestartAnnotation] == "" || pin.Parse(got.Spec.Template.Annotations[pin.PinsAnnotation])[pin.Source{Kind: pin.ConfigMap, Name: "cfg"}] != pin.SnapshotName("cfg", cfgDigest("v2").Sum) {
		t.Fatalf("not restarted onto v2's snapshot: %v", got.Spec.Template.Annotations)
	}
	t.Logf("store reads of the changed ConfigMap: %d; policy lookups: %d", reads, *lookups)
	if reads > 6 || *lookups != 1 {
		t.Errorf("store reads of the changed ConfigMap %d (want at most 6), policy lookups %d (want 1)", reads, *lookups)
	}
}
