package controller

import (
	"context"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/restart"
)

// TestHistoryRegressionEvictReleaseKeepsOldPins: found by the history
// simulation (WATCHER_HISTORY_SEED=1, step 13): a workload with strategy
// evict whose template still pins an older snapshot (a rollout undo
// brought it back) gets a release carrying a change of its ConfigMap
// (template and ConfigMap at change set "8"). verdict.InRelease turns the
// restart into a Refresh; for a pinned template under a strategy that
// writes it, the template is repinned to the recorded content
// (TestPinReleaseKeepsOldPins), but under evict nothing is written: the
// release's own rollout brings pods that read the snapshot of v1 while
// the ConfigMap, and watcher's record, are at v2, for good.
//
// Minimal history: d(pinned, evict) reads cfg; template pins cfg@v1;
// release 8 changes cfg to v2 and the template, both carrying "8".
// Expected: the template pins v2's snapshot, or nothing.
func TestHistoryRegressionEvictReleaseKeepsOldPins(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, api, rec := pinScene{
		now:    "v2",
		cfgAnn: map[string]string{optin.ChangeSet: "8"},
		depAnn: map[string]string{optin.RecordedChangeSet: "7", restart.StrategyAnnotation: "evict"},
		tmpAnn: map[string]string{optin.ChangeSet: "8"},
	}.setUp(t, ctx)
	reconcileWeb(t, ctx, r)
	var got appsv1.Deployment
	if err := api.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "web"}, &got); err != nil {
		t.Fatal(err)
	}
	rc, _ := plan.ParseRecord(got.Annotations[plan.RecordAnnotation])
	recordedNew := rc["ConfigMap/cfg"] != nil && rc["ConfigMap/cfg"].Equal(&plan.Entry{All: true, Keys: cfgDigest("v2").Keys})
	pinsNow := pin.Parse(got.Spec.Template.Annotations[pin.PinsAnnotation])[pin.Source{Kind: pin.ConfigMap, Name: "cfg"}]
	t.Logf("events %v; record at v2 %v; template pins cfg to %q", drain(rec), recordedNew, pinsNow)
	if pinsNow == pin.SnapshotName("cfg", cfgDigest("v1").Sum) {
		t.Errorf("release 8 under strategy evict carried cfg to v2 (record at v2: %v), and the template still pins v1's snapshot %s: the release's pods read v1",
			recordedNew, pinsNow)
	}
}

// TestHistoryRegressionEvictPinsMissingSnapshot: found by the history
// simulation (WATCHER_HISTORY_SEED=1, step 16): a workload with strategy
// evict whose template pins a snapshot that does not exist (a rollout
// undo brought back a revision, and the snapshot was deleted) is left so:
// no Warning, no template write. Under the default strategy the same
// template is repinned once with PinsStripped
// (TestPinCurrentPinsToMissingSnapshot); under evict a restart pins
// nothing, but it must still write the template once to remove the pins
// (verdict's Outcome.Template), or every new pod fails to start on the
// missing ConfigMap.
//
// Minimal history: d(pinned, evict) reads cfg at v1; template pins
// cfg@v1, whose snapshot is deleted. Expected: the template no longer
// pins the missing snapshot.
func TestHistoryRegressionEvictPinsMissingSnapshot(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, api, rec := pinScene{now: "v1", noSnapshot: true,
		depAnn: map[string]string{restart.StrategyAnnotation: "evict"}}.setUp(t, ctx)
	reconcileWeb(t, ctx, r)
	var got appsv1.Deployment
	if err := api.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "web"}, &got); err != nil {
		t.Fatal(err)
	}
	pinsNow := pin.Parse(got.Spec.Template.Annotations[pin.PinsAnnotation])[pin.Source{Kind: pin.ConfigMap, Name: "cfg"}]
	t.Logf("events %v; template pins cfg to %q", drain(rec), pinsNow)
	if pinsNow == pin.SnapshotName("cfg", cfgDigest("v1").Sum) {
		t.Errorf("under strategy evict the template still pins %s, which does not exist: new pods cannot start", pinsNow)
	}
}

// TestHistoryRegressionReleaseOfPinnedFloatingSource: found by the
// history simulation (WATCHER_HISTORY_SEED=10, step 11): a release (its
// template and ConfigMap at change set "8") changes a ConfigMap that is
// opted out (require-restart: "false", so it floats) but that the
// template still pins from before it was opted out. The release's own
// rollout carries the change, yet watcher restarts once more (Warning
// PinsStripped "pins configmap cfg, which floats, and it changed"): two
// rollouts for one release. Expected: no watcher restart; the template's
// pin of the floating source is removed (a template write without a
// restart id, as InRelease repins), so the release's pods read it live.
func TestHistoryRegressionReleaseOfPinnedFloatingSource(t *testing.T) {
	if why := pin.Floats(pin.ConfigMap, "", map[string]string{"require-restart": "false"}); why != "" {
		t.Skipf("floats: %s", why)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, api, rec := pinScene{
		now:    "v2",
		cfgAnn: map[string]string{optin.ChangeSet: "8", "require-restart": "false"},
		depAnn: map[string]string{optin.RecordedChangeSet: "7"},
		tmpAnn: map[string]string{optin.ChangeSet: "8"},
	}.setUp(t, ctx)
	reconcileWeb(t, ctx, r)
	var got appsv1.Deployment
	if err := api.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "web"}, &got); err != nil {
		t.Fatal(err)
	}
	_, restarted := got.Spec.Template.Annotations[plan.RestartAnnotation]
	pinsNow := pin.Parse(got.Spec.Template.Annotations[pin.PinsAnnotation])[pin.Source{Kind: pin.ConfigMap, Name: "cfg"}]
	t.Logf("events %v; restarted %v; template pins cfg to %q", drain(rec), restarted, pinsNow)
	if restarted {
		t.Errorf("release 8 carried the change of the floating ConfigMap cfg, and watcher restarted the workload too")
	}
	if pinsNow != "" {
		t.Errorf("the release's template still pins the floating ConfigMap cfg to %s", pinsNow)
	}
}

// TestHistoryRegressionReleaseWhilePinningOffKeepsOldPins: found by the
// history simulation (WATCHER_HISTORY_SEED=18, step 19): while pinning is
// off (the MutatingAdmissionPolicy is gone), a release carrying a change
// of a ConfigMap (template and ConfigMap at change set "8") is recorded
// (InRelease) but the template keeps its pins of the old content; once
// the policy is back, every new pod (a scale-up, a rescheduled pod) reads
// the old snapshot while the record and the ConfigMap are at v2, and
// nothing rolls again. Expected: the template's pins are removed (or
// brought to v2) by the release's refresh.
func TestHistoryRegressionReleaseWhilePinningOffKeepsOldPins(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, api, rec := pinScene{
		now:    "v2",
		cfgAnn: map[string]string{optin.ChangeSet: "8"},
		depAnn: map[string]string{optin.RecordedChangeSet: "7"},
		tmpAnn: map[string]string{optin.ChangeSet: "8"},
		getErr: func(obj client.Object) error {
			if _, ok := obj.(*admissionv1.MutatingAdmissionPolicy); ok {
				return apierrors.NewNotFound(admissionv1.Resource("mutatingadmissionpolicies"), "watcher-pins")
			}
			return nil
		},
	}.setUp(t, ctx)
	reconcileWeb(t, ctx, r)
	var got appsv1.Deployment
	if err := api.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "web"}, &got); err != nil {
		t.Fatal(err)
	}
	pinsNow := pin.Parse(got.Spec.Template.Annotations[pin.PinsAnnotation])[pin.Source{Kind: pin.ConfigMap, Name: "cfg"}]
	t.Logf("events %v; template pins cfg to %q", drain(rec), pinsNow)
	if pinsNow == pin.SnapshotName("cfg", cfgDigest("v1").Sum) {
		t.Errorf("release 8 carried cfg to v2 while pinning was off; the template still pins v1's snapshot %s, which new pods read once the policy is back", pinsNow)
	}
}
