package policy_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watcher-dev/watcher/api/v1alpha1"
	"github.com/watcher-dev/watcher/internal/packed"
	"github.com/watcher-dev/watcher/internal/policy"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/workload"
)

// fakeStore is a policy.Workloads of fixed objects of namespace "shop",
// by kind.
type fakeStore map[string][]*metav1.PartialObjectMetadata

func (f fakeStore) Get(kind, _, name string) (*metav1.PartialObjectMetadata, error) {
	for _, o := range f[kind] {
		if o.Name == name {
			return o, nil
		}
	}
	return nil, nil
}
func (f fakeStore) Workloads(kind, _ string) ([]*packed.Object, error) {
	return packed.PackAll(f[kind]), nil
}
func (f fakeStore) List(kind refs.Kind, _ string) ([]*packed.Object, error) {
	return packed.PackAll(f[string(kind)]), nil
}
func (f fakeStore) UsersOf(refs.Kind, string, string) ([]workload.Key, error) { return nil, nil }
func (f fakeStore) Reindex(string, string, string) (bool, error)              { return false, nil }

// TestReady: one case per row of the Ready table.
func TestReady(t *testing.T) {
	st := fakeStore{
		"ConfigMap":  {cfg("cm", map[string]string{"tier": "api"})},
		"Deployment": {cfg("web", map[string]string{"app": "web"})},
	}
	window := func(schedule, tz string) []v1alpha1.MaintenanceWindow {
		return []v1alpha1.MaintenanceWindow{{Schedule: schedule, Duration: metav1.Duration{Duration: time.Hour}, TimeZone: tz}}
	}
	tests := []struct {
		name    string
		p       *v1alpha1.ReloadPolicy
		status  metav1.ConditionStatus
		reason  string
		message string
	}{
		{"valid", rp("p", []v1alpha1.Source{byName("ConfigMap", "cm")}, webTarget), metav1.ConditionTrue, policy.ReasonValid, "the policy applies"},
		{"valid, by selectors", rp("p", []v1alpha1.Source{bySelector("ConfigMap", map[string]string{"tier": "api"})},
			v1alpha1.Target{Kind: "Deployment", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}), metav1.ConditionTrue, policy.ReasonValid, "the policy applies"},
		{"valid, no targets", rp("p", []v1alpha1.Source{byName("ConfigMap", "cm")}), metav1.ConditionTrue, policy.ReasonValid, "the policy applies"},
		{"a source missing", rp("p", []v1alpha1.Source{byName("ConfigMap", "cm"), byName("Secret", "s")}, webTarget), metav1.ConditionTrue, policy.ReasonSourcesNotFound,
			"Secret s does not exist yet; the policy applies to them once they do"},
		{"a selector matching nothing, a target missing", rp("p", []v1alpha1.Source{bySelector("Secret", map[string]string{"tier": "api"})}, v1alpha1.Target{Kind: "StatefulSet", Name: "db"}), metav1.ConditionTrue, policy.ReasonSourcesNotFound,
			"no Secret matches tier=api; StatefulSet db does not exist yet; the policy applies to them once they do"},
		{"a target missing", rp("p", []v1alpha1.Source{byName("ConfigMap", "cm")}, v1alpha1.Target{Kind: "StatefulSet", Name: "db"}), metav1.ConditionTrue, policy.ReasonTargetsNotFound,
			"StatefulSet db does not exist yet; the policy applies to them once they do"},
		{"invalid schedule", withWindows(rp("p", []v1alpha1.Source{byName("ConfigMap", "cm")}), window("0 25 * * *", "")), metav1.ConditionFalse, policy.ReasonInvalidSchedule, ""},
		{"invalid time zone", withWindows(rp("p", []v1alpha1.Source{byName("ConfigMap", "cm")}), window("0 2 * * *", "Europe/Atlantis")), metav1.ConditionFalse, policy.ReasonInvalidTimeZone, ""},
		{"invalid selector", rp("p", []v1alpha1.Source{{Kind: "ConfigMap", Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}}}),
			metav1.ConditionFalse, policy.ReasonInvalidSelector, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := policy.Ready(policy.Compile(tt.p), st)
			if err != nil {
				t.Fatal(err)
			}
			if c.Status != tt.status || c.Reason != tt.reason || (tt.message != "" && c.Message != tt.message) || c.Message == "" {
				t.Errorf("Ready = %s %s %q, want %s %s %q", c.Status, c.Reason, c.Message, tt.status, tt.reason, tt.message)
			}
			if c.ObservedGeneration != 1 {
				t.Errorf("observedGeneration %d", c.ObservedGeneration)
			}
		})
	}
}

func withWindows(p *v1alpha1.ReloadPolicy, ws []v1alpha1.MaintenanceWindow) *v1alpha1.ReloadPolicy {
	p.Spec.MaintenanceWindows = ws
	return p
}

// TestDesired: the status is the one read plus this replica's journal;
// what other replicas wrote is kept; lastRestarts is bounded; a status
// computed again from its own result is the same (no write loop).
func TestDesired(t *testing.T) {
	p := policy.Compile(rp("p", []v1alpha1.Source{byName("ConfigMap", "cm")}, webTarget))
	ready := metav1.Condition{Type: policy.ConditionReady, Status: metav1.ConditionTrue, Reason: policy.ReasonValid, Message: "m", ObservedGeneration: 1}
	t0 := time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC)
	web := workload.Key{Kind: "Deployment", Namespace: "shop", Name: "web"}
	api := workload.Key{Kind: "Deployment", Namespace: "shop", Name: "api"}
	gone := workload.Key{Kind: "Deployment", Namespace: "shop", Name: "gone"}
	selected := []workload.Key{web, api}
	restart := func(name string, at time.Time) v1alpha1.Restart {
		return v1alpha1.Restart{Kind: "Deployment", Name: name, At: metav1.NewTime(at), Sources: []string{"ConfigMap/cm"}}
	}
	pending := func(name string, since time.Time) v1alpha1.PendingRestart {
		return v1alpha1.PendingRestart{Kind: "Deployment", Name: name, Since: metav1.NewTime(since), Reason: policy.ReasonMaintenanceWindow}
	}
	var many []v1alpha1.Restart
	for i := range 12 {
		many = append(many, restart("web", t0.Add(time.Duration(i)*time.Minute)))
	}
	tests := []struct {
		name         string
		cur          v1alpha1.ReloadPolicyStatus
		j            *policy.Journal
		pending      []v1alpha1.PendingRestart
		lastRestarts []v1alpha1.Restart
	}{
		{"nothing to say", v1alpha1.ReloadPolicyStatus{}, nil, nil, nil},
		{"a restart", v1alpha1.ReloadPolicyStatus{}, &policy.Journal{Restarts: []v1alpha1.Restart{restart("web", t0)}}, nil, []v1alpha1.Restart{restart("web", t0)}},
		{"another replica's restarts kept, latest first", v1alpha1.ReloadPolicyStatus{LastRestarts: []v1alpha1.Restart{restart("api", t0)}},
			&policy.Journal{Restarts: []v1alpha1.Restart{restart("web", t0.Add(time.Second))}}, nil, []v1alpha1.Restart{restart("web", t0.Add(time.Second)), restart("api", t0)}},
		{"a restart noted twice is listed once", v1alpha1.ReloadPolicyStatus{LastRestarts: []v1alpha1.Restart{restart("web", t0)}},
			&policy.Journal{Restarts: []v1alpha1.Restart{restart("web", t0.Add(300*time.Millisecond))}}, nil, []v1alpha1.Restart{restart("web", t0)}},
		{"at most 10, the latest", v1alpha1.ReloadPolicyStatus{LastRestarts: many[:6]}, &policy.Journal{Restarts: many[6:]}, nil,
			[]v1alpha1.Restart{many[11], many[10], many[9], many[8], many[7], many[6], many[5], many[4], many[3], many[2]}},
		{"held: pending since then", v1alpha1.ReloadPolicyStatus{}, &policy.Journal{Held: map[workload.Key]time.Time{web: t0}}, []v1alpha1.PendingRestart{pending("web", t0)}, nil},
		{"held again: the first time kept", v1alpha1.ReloadPolicyStatus{Pending: []v1alpha1.PendingRestart{pending("web", t0)}},
			&policy.Journal{Held: map[workload.Key]time.Time{web: t0.Add(time.Hour)}}, []v1alpha1.PendingRestart{pending("web", t0)}, nil},
		{"released", v1alpha1.ReloadPolicyStatus{Pending: []v1alpha1.PendingRestart{pending("web", t0), pending("api", t0)}},
			&policy.Journal{Released: map[workload.Key]bool{web: true}}, []v1alpha1.PendingRestart{pending("api", t0)}, nil},
		{"no longer selected: dropped", v1alpha1.ReloadPolicyStatus{Pending: []v1alpha1.PendingRestart{pending("gone", t0)}},
			&policy.Journal{Held: map[workload.Key]time.Time{gone: t0}}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := policy.Desired(p, tt.cur, ready, tt.j, selected)
			if got.ObservedGeneration != 1 || len(got.Conditions) != 1 || got.Conditions[0].Reason != policy.ReasonValid {
				t.Errorf("observedGeneration %d, conditions %v", got.ObservedGeneration, got.Conditions)
			}
			if diff := cmp.Diff(tt.pending, got.Pending); diff != "" {
				t.Errorf("pending (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.lastRestarts, got.LastRestarts); diff != "" {
				t.Errorf("lastRestarts (-want +got):\n%s", diff)
			}
			again := policy.Desired(p, got, ready, tt.j, selected)
			if !policy.Equal(got, again) {
				t.Errorf("not stable:\n%s", cmp.Diff(got, again))
			}
		})
	}
}

// TestHold: restarts wait until every policy that has windows has one
// open; an invalid window holds until it is fixed.
func TestHold(t *testing.T) {
	withWindow := func(name, schedule string) *v1alpha1.ReloadPolicy {
		return withWindows(rp(name, []v1alpha1.Source{byName("ConfigMap", "cm")}, webTarget),
			[]v1alpha1.MaintenanceWindow{{Schedule: schedule, Duration: metav1.Duration{Duration: time.Hour}}})
	}
	at := func(h int) time.Time { return time.Date(2026, 1, 15, h, 30, 0, 0, time.UTC) }
	tests := []struct {
		name     string
		policies []*v1alpha1.ReloadPolicy
		now      time.Time
		hold     bool
		until    time.Time
	}{
		{"no policy", nil, at(3), false, time.Time{}},
		{"no windows", []*v1alpha1.ReloadPolicy{rp("p", []v1alpha1.Source{byName("ConfigMap", "cm")}, webTarget)}, at(3), false, time.Time{}},
		{"open", []*v1alpha1.ReloadPolicy{withWindow("p", "0 2 * * *")}, at(2), false, time.Time{}},
		{"closed", []*v1alpha1.ReloadPolicy{withWindow("p", "0 2 * * *")}, at(3), true, time.Date(2026, 1, 16, 2, 0, 0, 0, time.UTC)},
		{"one of two closed", []*v1alpha1.ReloadPolicy{withWindow("p", "0 2 * * *"), withWindow("q", "0 4 * * *")}, at(2), true, at(4).Add(-30 * time.Minute)},
		{"invalid", []*v1alpha1.ReloadPolicy{withWindow("p", "0 2 * * * *")}, at(2), true, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := policy.NewIndex()
			for _, p := range tt.policies {
				ix.Set(policy.Compile(p))
			}
			a, err := ix.For(web("shop"), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			hold, until, msg := a.Hold(tt.now)
			if hold != tt.hold || !until.Equal(tt.until) || hold != (msg != "") {
				t.Errorf("Hold = %v, %s, %q; want %v, %s", hold, until, msg, tt.hold, tt.until)
			}
		})
	}
}
