package explain_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/explain"
	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/packed"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/resolve"
)

// TestExplainWorkload: one case per situation explain tells apart, each
// decided as the controller decides.
func TestExplainWorkload(t *testing.T) {
	type want struct {
		action, record string
		pending        bool
		watched        bool
		status         string            // a part of the status
		verdicts       map[string]string // "Kind/name": "verdict rule state"
	}
	web := map[string]string{"ConfigMap/app-config": "count  present", "Secret/db": "ignore config-opted-out present"}
	tests := []struct {
		name   string
		change func(s *scenario, set *explain.Settings) client.Object
		want   want
	}{
		{"a key read changed: restart pending", func(s *scenario, _ *explain.Settings) client.Object { return s.web },
			want{"restart", "current", true, true, "restart pending because ConfigMap app-config changed (keys: LOG_LEVEL)", web}},
		{"the record is the current content: up to date", func(s *scenario, _ *explain.Settings) client.Object {
			s.web.Annotations = recorded(record(map[client.Object][]string{s.appConfig: {"LOG_LEVEL", "PORT"}, s.db: nil}))
			return s.web
		}, want{"none", "current", false, true, "up to date: no restart pending", web}},
		{"no record: adopted, no restart", func(s *scenario, _ *explain.Settings) client.Object { return s.cache },
			want{"adopt", "absent", false, true, "not adopted yet", map[string]string{"ConfigMap/app-config": "count  present"}}},
		{"a record made with another hash key: adopted again", func(s *scenario, _ *explain.Settings) client.Object {
			s.web.Annotations[plan.HashKeyAnnotation] = "0000000000000000"
			return s.web
		}, want{"adopt", "other-key", false, true, "another hash key", web}},
		{"an unreadable record: adopted again", func(s *scenario, _ *explain.Settings) client.Object {
			s.web.Annotations[plan.RecordAnnotation] = "{oops"
			return s.web
		}, want{"adopt", "unreadable", false, true, "not adopted yet", web}},
		{"the workload opts out: its record is removed", func(s *scenario, _ *explain.Settings) client.Object {
			s.agent.Annotations[plan.RecordAnnotation] = record(map[client.Object][]string{s.appConfigOld: nil})
			s.agent.Annotations[plan.HashKeyAnnotation] = hasher.ID()
			return s.agent
		}, want{"forget", "current", false, true, "opted out", map[string]string{"ConfigMap/app-config": "drop workload-opted-out present"}}},
		{"annotated discovery, not opted in: dropped", func(s *scenario, set *explain.Settings) client.Object {
			set.Rules = plan.NewChain(plan.Options{OptOutAnnotation: "require-restart", Discovery: plan.DiscoveryAnnotated})
			return s.web
		}, want{"forget", "current", false, true, "opted out", map[string]string{"ConfigMap/app-config": "drop not-opted-in present", "Secret/db": "drop not-opted-in present"}}},
		{"a Job not opted in, discovery all: dropped (Jobs are opt-in only)", func(s *scenario, _ *explain.Settings) client.Object {
			return jobOf(s.web, nil)
		}, want{"forget", "current", false, true, "opted out", map[string]string{"ConfigMap/app-config": "drop not-opted-in present", "Secret/db": "drop not-opted-in present"}}},
		{"a Job opted in with Reloader's annotation: restart pending", func(s *scenario, _ *explain.Settings) client.Object {
			return jobOf(s.web, map[string]string{optin.ReloaderAuto: "true"})
		}, want{"restart", "current", true, true, "restart pending because ConfigMap app-config changed (keys: LOG_LEVEL)", web}},
		{"the hash key is unreadable: nothing compared", func(s *scenario, set *explain.Settings) client.Object {
			set.HashKeyID, set.HashKeyProblem = "", "cannot read Secret watcher/watcher-hash-key: forbidden"
			return s.web
		}, want{"unknown", "unknown", false, true, "hashes not compared: cannot read Secret watcher/watcher-hash-key: forbidden", web}},
		{"a Secret it uses is unreadable: nothing decided", func(s *scenario, _ *explain.Settings) client.Object {
			s.configs["Secret/db"] = explain.Config{Kind: refs.Secret, Namespace: ns, Name: "db", Unreadable: "forbidden"}
			return s.web
		}, want{"unknown", "current", false, true, "Secret db is unreadable (forbidden)",
			map[string]string{"ConfigMap/app-config": "count  present", "Secret/db": "count  unreadable"}}},
		{"a required key is missing: restart held", func(s *scenario, _ *explain.Settings) client.Object {
			s.appConfig.Data = map[string]string{"PORT": "9090"}
			s.configs["ConfigMap/app-config"] = config(s.appConfig)
			return s.web
		}, want{"none", "current", false, true, "restart held", web}},
		{"not selected by the workload selector: not watched", func(s *scenario, set *explain.Settings) client.Object {
			set.WorkloadSelector = labels.SelectorFromSet(labels.Set{"app": "other"})
			return s.web
		}, want{"restart", "current", false, false, "not watched: its labels do not match --workload-selector", web}},
		{"namespace not watched", func(s *scenario, set *explain.Settings) client.Object {
			set.Namespaces = []string{"elsewhere"}
			return s.web
		}, want{"none", "current", false, false, "not watched: its namespace is not watched",
			map[string]string{"ConfigMap/app-config": "count  not-watched", "Secret/db": "count  not-watched"}}},
		{"namespace not selected by the namespace selector", func(s *scenario, set *explain.Settings) client.Object {
			set.NamespaceSelector = labels.SelectorFromSet(labels.Set{"team": "on"})
			set.NamespaceLabels = func(string) (map[string]string, bool) { return map[string]string{"team": "off"}, true }
			return s.web
		}, want{"none", "current", false, false, "not watched: its namespace's labels do not match --namespace-selector",
			map[string]string{"ConfigMap/app-config": "count  not-watched", "Secret/db": "count  not-watched"}}},
		{"namespace selected by the namespace selector", func(s *scenario, set *explain.Settings) client.Object {
			set.NamespaceSelector = labels.SelectorFromSet(labels.Set{"team": "on"})
			set.NamespaceLabels = func(string) (map[string]string, bool) { return map[string]string{"team": "on"}, true }
			return s.web
		}, want{"restart", "current", true, true, "restart pending", web}},
		{"namespace labels unreadable: taken as selected", func(s *scenario, set *explain.Settings) client.Object {
			set.NamespaceSelector = labels.SelectorFromSet(labels.Set{"team": "on"})
			set.NamespaceLabels = func(string) (map[string]string, bool) { return nil, false }
			return s.web
		}, want{"restart", "current", true, true, "restart pending", web}},
		{"Secrets of its namespace ignored: the Secret dropped", func(s *scenario, set *explain.Settings) client.Object {
			set.Resolver = resolve.Standard(resolve.Settings{IgnoreSecretNamespaces: []string{ns}})
			return s.web
		}, want{"restart", "current", true, true, "restart pending", map[string]string{"ConfigMap/app-config": "count  present", "Secret/db": "drop ignored-namespace present"}}},
		{"the ConfigMap not selected by the config selector: taken as absent", func(s *scenario, set *explain.Settings) client.Object {
			set.ConfigSelector = labels.SelectorFromSet(labels.Set{"tier": "api"})
			return s.web
		}, want{"none", "current", false, true, "up to date", map[string]string{"ConfigMap/app-config": "count  not-watched", "Secret/db": "count  not-watched"}}}, // watcher sees neither: no annotation to opt out
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, set := newScenario(), settings()
			obj := tt.change(s, &set)
			var events []explain.Event
			if obj == client.Object(s.web) {
				events = s.events
			}
			rep, err := explain.ExplainWorkload(set, explain.Workload{Object: obj, Configs: s.configs, Events: events})
			if err != nil {
				t.Fatal(err)
			}
			got := want{rep.Action, rep.Record, rep.Pending, rep.Watched, tt.want.status, map[string]string{}}
			if !strings.Contains(rep.Status, tt.want.status) {
				got.status = rep.Status
			}
			for _, u := range rep.Uses {
				got.verdicts[u.Kind+"/"+u.Name] = u.Verdict + " " + u.Rule + " " + u.State
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("report (-want +got):\n%s\nstatus: %s", diff, rep.Status)
			}
			if rep.Action == explain.ActionUnknown {
				for _, u := range rep.Uses {
					if len(u.Hashes) > 0 {
						t.Errorf("%s/%s: hashes compared though nothing can be decided: %v", u.Kind, u.Name, u.Hashes)
					}
				}
			}
		})
	}
}

// TestExplainChangeSet: the change set a workload's restart waits for,
// kept on it, is shown with its settle; none when it waits for none.
func TestExplainChangeSet(t *testing.T) {
	s, set := newScenario(), settings()
	opened := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	s.web.Annotations[guard.PendingAnnotation] = guard.Pending{Opened: opened, Last: opened.Add(40 * time.Second),
		Sources: []guard.Source{{Object: object.Ref{Kind: "ConfigMap", Namespace: ns, Name: "app-config"}, Sum: "0123456789abcdef"}}}.
		Encode(string(s.web.UID), func([]byte) string { return "mac" })
	s.web.Annotations[optin.Settle] = "1m"
	s.web.Spec.Template.Annotations = map[string]string{optin.ChangeSet: "8"}
	s.web.Annotations[optin.RecordedChangeSet] = "7"
	app := s.configs["ConfigMap/app-config"]
	app.Annotations = map[string]string{optin.ChangeSet: "8"}
	s.configs["ConfigMap/app-config"] = app
	rep, err := explain.ExplainWorkload(set, explain.Workload{Object: s.web, Configs: s.configs})
	if err != nil {
		t.Fatal(err)
	}
	want := &explain.ChangeSet{Opened: "2026-11-27T10:00:00Z", Last: "2026-11-27T10:00:40Z", Sources: []string{"ConfigMap app-config"}, Settle: "1m"}
	if diff := cmp.Diff(want, rep.ChangeSet); diff != "" {
		t.Errorf("change set (-want +got):\n%s", diff)
	}
	var b strings.Builder
	if err := rep.WriteText(&b); err != nil || !strings.Contains(b.String(), "waiting since 2026-11-27T10:00:00Z (last change 2026-11-27T10:00:40Z): ConfigMap app-config") ||
		!strings.Contains(b.String(), `pod template "8" (recorded "7"), ConfigMap app-config "8"`) {
		t.Errorf("text: %v\n%s", err, b.String())
	}
	delete(s.web.Annotations, guard.PendingAnnotation)
	if rep, _ := explain.ExplainWorkload(set, explain.Workload{Object: s.web, Configs: s.configs}); rep.ChangeSet != nil {
		t.Errorf("a change set shown for a workload waiting for none: %+v", rep.ChangeSet)
	}
}

// jobOf returns a Job with d's metadata, pod template and more annotations.
func jobOf(d *appsv1.Deployment, annotations map[string]string) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: *d.ObjectMeta.DeepCopy(), Spec: batchv1.JobSpec{Template: *d.Spec.Template.DeepCopy()}}
	for k, v := range annotations {
		j.Annotations[k] = v
	}
	return j
}

// TestExplainConfig: what a change of each key restarts, user by user.
func TestExplainConfig(t *testing.T) {
	s := newScenario()
	// cache adopted: a change of its ConfigMap would roll its template only.
	s.cache.Annotations = recorded(record(map[client.Object][]string{s.appConfig: nil}))
	extra := &appsv1.Deployment{}
	s.web.DeepCopyInto(extra)
	extra.Name, extra.Annotations = "new-user", recorded(record(map[client.Object][]string{s.db: nil}))
	ws := append(s.workloads(), explain.Workload{Object: extra, Configs: s.configs})
	rep := explain.ExplainConfig(settings(), s.configs["ConfigMap/app-config"], ws)
	effects := map[string]string{}
	for _, u := range rep.Users {
		effects[u.Kind+"/"+u.Name] = u.Effect
	}
	wantEffects := map[string]string{
		"Deployment/web":      explain.EffectRestart,
		"Deployment/new-user": explain.EffectRecord, // app-config not in its record yet
		"StatefulSet/cache":   explain.EffectOnDelete,
		"DaemonSet/agent":     explain.EffectNone,
	}
	if diff := cmp.Diff(wantEffects, effects); diff != "" {
		t.Errorf("effects (-want +got):\n%s", diff)
	}
	wantByKey := []explain.KeyEffect{
		{Key: "LOG_LEVEL", Restarts: []string{"Deployment/web"}, OnDelete: []string{"StatefulSet/cache"}},
		{Key: "PORT", Restarts: []string{"Deployment/web"}, OnDelete: []string{"StatefulSet/cache"}},
	}
	if diff := cmp.Diff(wantByKey, rep.ByKey); diff != "" {
		t.Errorf("by key (-want +got):\n%s", diff)
	}
	if len(rep.NewKey) != 0 {
		t.Errorf("a new key restarts %v; want nothing (the only reader of every key rolls on delete)", rep.NewKey)
	}
}

// listed is a resolve.Configs over fixed objects.
type listed []*metav1.PartialObjectMetadata

func (l listed) List(kind refs.Kind, namespace string) ([]*packed.Object, error) {
	var out []*metav1.PartialObjectMetadata
	for _, o := range l {
		if o.Kind == string(kind) && o.Namespace == namespace {
			out = append(out, o)
		}
	}
	return packed.PackAll(out), nil
}

// TestExplainWorkloadPatterns: a reload-list pattern names the objects of
// the namespace it matches, as the controller expands it from its store.
func TestExplainWorkloadPatterns(t *testing.T) {
	s, set := newScenario(), settings()
	extra := configMap("extra-1", map[string]string{"k": "v"}, nil)
	s.configs["ConfigMap/extra-1"] = config(extra)
	set.Configs = listed{{TypeMeta: metav1.TypeMeta{Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "extra-1"}}}
	s.cache.Annotations = map[string]string{"configmap.reloader.stakater.com/reload": "extra-.*"}
	rep, err := explain.ExplainWorkload(set, explain.Workload{Object: s.cache, Configs: s.configs})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range rep.Uses {
		got = append(got, u.Kind+"/"+u.Name+" "+strings.Join(u.Sources, ",")+" "+u.Verdict)
	}
	want := []string{"ConfigMap/app-config pod spec count", "ConfigMap/extra-1 reload lists count"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("uses (-want +got):\n%s", diff)
	}
}
