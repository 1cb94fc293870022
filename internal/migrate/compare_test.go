package migrate

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watcher-dev/watcher/internal/cause"
)

// TestMarksAndCompare: Reloader's marks, dated, and the outcome per
// workload.
func TestMarksAndCompare(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	recent := metav1.NewTime(now.Add(-10 * time.Minute))
	old := metav1.NewTime(now.Add(-3 * time.Hour))
	annotated := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "annotated"}}
	annotated.Spec.Template.Annotations = map[string]string{LastReloadedFrom: `{"type":"CONFIGMAP","name":"cfg","namespace":"shop","hash":"abc","containerRefs":["app"],"observedAt":` +
		jsonInt(now.Add(-5*time.Minute).Unix()) + `}`}
	envs := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "envs", ManagedFields: []metav1.ManagedFieldsEntry{
		{Manager: "kubectl", Time: &old, FieldsV1: metav1.NewFieldsV1(`{"f:spec":{}}`)},
		{Manager: "Reloader", Time: &recent, FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{"f:env":{"k:{\"name\":\"STAKATER_CFG_CONFIGMAP\"}":{}}}}}}}}`)},
	}}}
	envs.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", Env: []corev1.EnvVar{{Name: "STAKATER_CFG_CONFIGMAP", Value: "abc"}, {Name: "STAKATER_X"}}}}
	stale := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "stale"}}
	stale.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", Env: []corev1.EnvVar{{Name: "STAKATER_OLD_SECRET", Value: "abc"}}}}

	if m := MarksOf(annotated); len(m) != 1 || m[0].Object != "ConfigMap cfg" || !m[0].Time.Equal(now.Add(-5*time.Minute)) {
		t.Errorf("MarksOf(annotated) = %+v", m)
	}
	if m := MarksOf(envs); len(m) != 1 || m[0].Via != "env STAKATER_CFG_CONFIGMAP" || !m[0].Time.Equal(recent.Time) {
		t.Errorf("MarksOf(envs) = %+v", m)
	}
	if m := MarksOf(stale); len(m) != 1 || !m[0].Time.IsZero() {
		t.Errorf("MarksOf(stale) = %+v", m)
	}
	var ws []Workload
	for _, d := range []*appsv1.Deployment{annotated, envs, stale} {
		ws = append(ws, Workload{Kind: "Deployment", Namespace: d.Namespace, Name: d.Name, Marks: MarksOf(d)})
	}
	ev := func(name, reason string, at time.Time) Event {
		return Event{Kind: "Deployment", Namespace: "shop", Name: name, Reason: reason, Note: "n", Time: at, Count: 1}
	}
	c := Compare(CompareInput{Since: now.Add(-time.Hour), Workloads: ws, Events: []Event{
		ev("annotated", cause.ReasonWouldRestart, now.Add(-4*time.Minute)),
		ev("watcher-only", cause.ReasonWouldRestart, now.Add(-4*time.Minute)),
		ev("too-old", cause.ReasonWouldRestart, now.Add(-2*time.Hour)),
		ev("event-only", ReasonReloaded, now.Add(-time.Minute)),
		ev("event-only", "Scaled", now.Add(-time.Minute)),
	}})
	got := map[string]string{}
	for _, o := range c.Outcomes {
		got[o.Name] = o.Result
	}
	want := map[string]string{"annotated": Agree, "watcher-only": OnlyWatcher, "envs": OnlyReloader, "event-only": OnlyReloader}
	if len(got) != len(want) {
		t.Errorf("outcomes %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	if c.Counts[Agree] != 1 || c.Counts[OnlyWatcher] != 1 || c.Counts[OnlyReloader] != 2 {
		t.Errorf("counts %v", c.Counts)
	}
	var text bytes.Buffer
	if err := c.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "1 agree, 1 only watcher, 2 only Reloader") || !strings.Contains(text.String(), "why: watcher explain deployment/envs -n shop") {
		t.Errorf("text:\n%s", text.String())
	}
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestCompareUntrustedEvents: an Event anyone in a namespace may write is
// counted only about a workload kind and a valid name, and its note is
// shown quoted and cut, never as written (no terminal escapes).
func TestCompareUntrustedEvents(t *testing.T) {
	now := time.Now()
	c := Compare(CompareInput{Since: now.Add(-time.Hour), Events: []Event{
		{Kind: "Deployment", Namespace: "shop", Name: "web\x1b[2J", Reason: ReasonReloaded, Time: now},
		{Kind: "Secret", Namespace: "shop", Name: "web", Reason: ReasonReloaded, Time: now},
		{Kind: "Deployment", Namespace: "shop", Name: "web", Reason: ReasonReloaded, Note: "\x1b[31m" + strings.Repeat("x", 1000), Time: now},
	}})
	if len(c.Outcomes) != 1 || c.Outcomes[0].Name != "web" || c.Outcomes[0].Kind != "Deployment" {
		t.Fatalf("outcomes %+v, want only Deployment web", c.Outcomes)
	}
	var text bytes.Buffer
	if err := c.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if s := text.String(); strings.Contains(s, "\x1b") || strings.Contains(s, strings.Repeat("x", maxShown+1)) {
		t.Errorf("text shows the note as written:\n%q", s)
	}
}
