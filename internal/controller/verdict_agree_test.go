package controller

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/explain"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/settings"
	"github.com/watcher-dev/watcher/internal/verdict"
)

// verdictSeed seeds TestExplainIsTheVerdict; a failure prints it.
const verdictSeed = 47

// TestExplainIsTheVerdict: what explain says of a pinned workload (the
// action after the chain of package verdict, the rule, which sources a
// restart pins) is what the controller does once it reconciles it, seen
// on the Deployment and its Events: restarted or not, the pins its
// template carries, a RolledBack or PinsStripped Event, the change-set id
// recorded. Over generated workloads: template pins (none, the recorded
// content's, the live content's, a snapshot gone), revision labels,
// watcher.dev/rolled-back-from, change-set ids on the template, the
// source and the record, an opted-out source, a second source.
func TestExplainIsTheVerdict(t *testing.T) {
	const n = 80
	rnd := rand.New(rand.NewPCG(verdictSeed, 3))
	t.Logf("seed %d", verdictSeed)
	seen := map[string]int{}
	for i := range n {
		sc, described := genVerdictScene(rnd)
		said, did := explainVerdict(t, sc), controllerVerdict(t, sc)
		if said != did {
			t.Errorf("case %d (seed %d): explain says %q, the controller does %q\n%s", i, verdictSeed, said, did, described)
		}
		seen[strings.SplitN(did, " ", 2)[0]]++
	}
	t.Logf("outcomes: %v", seen)
	for _, rule := range []string{"restart", "none", "rule=" + verdict.RuleRolledBack, "rule=" + verdict.RuleInRelease, "rule=" + verdict.RuleChangeSetSeen} {
		if seen[rule] == 0 {
			t.Errorf("no case had %q: the generator misses it (%v)", rule, seen)
		}
	}
}

// genVerdictScene draws a pinScene and says it.
func genVerdictScene(rnd *rand.Rand) (pinScene, string) {
	snap := func(v string) string { return pin.SnapshotName("cfg", cfgDigest(v).Sum) }
	cfgSrc := pin.Source{Kind: pin.ConfigMap, Name: "cfg"}
	pick := func(vs ...string) string { return vs[rnd.IntN(len(vs))] }
	s := pinScene{now: pick("v1", "v2"), cfgAnn: map[string]string{}, depAnn: map[string]string{}, tmpAnn: map[string]string{},
		depLabels: map[string]string{}}
	var said []string
	switch v := pick("", "v1", "v2", "v3"); v {
	case "":
		s.templatePins = pin.Pins{}
		s.tmpAnn[pin.PinsAnnotation] = ""
	default:
		s.templatePins = pin.Pins{cfgSrc: snap(v)}
	}
	said = append(said, "template pins "+s.templatePins.String(), "cfg now "+s.now)
	switch l := pick("", "v1", "v2", "template"); l {
	case "template":
		s.depLabels[pin.RevisionLabel] = s.templatePins.Digest()
	case "":
		s.depLabels[pin.RevisionLabel] = ""
	default:
		s.depLabels[pin.RevisionLabel] = pin.Pins{cfgSrc: snap(l)}.Digest()
	}
	said = append(said, "revision label of "+s.depLabels[pin.RevisionLabel])
	if rnd.IntN(3) == 0 {
		s.depAnn[pin.RolledBackFrom] = pin.Pins{cfgSrc: snap("v2")}.String()
		said = append(said, "rolled back from v2")
	}
	if rnd.IntN(5) == 0 {
		s.depAnn[pin.Annotation] = "false"
		said = append(said, "not asking for pins")
	}
	if rnd.IntN(2) == 0 {
		s.extra = append(s.extra, snapshotOf("v2", nil))
		said = append(said, "snapshot of v2 exists")
	}
	if id := pick("", "8"); id != "" {
		s.tmpAnn[optin.ChangeSet] = id
	}
	if id := pick("", "", "8", "9"); id != "" {
		s.cfgAnn[optin.ChangeSet] = id
	}
	if id := pick("", "7", "8"); id != "" {
		s.depAnn[optin.RecordedChangeSet] = id
	}
	said = append(said, fmt.Sprintf("change sets: template %q, cfg %q, recorded %q", s.tmpAnn[optin.ChangeSet], s.cfgAnn[optin.ChangeSet], s.depAnn[optin.RecordedChangeSet]))
	if rnd.IntN(5) == 0 {
		s.cfgAnn["require-restart"] = "false"
		said = append(said, "cfg opted out")
	}
	if o := pick("", "", "o1", "o2"); o != "" {
		s.other = o
		said = append(said, "other now "+o)
	}
	return s, "  " + strings.Join(said, "\n  ")
}

// verdictSays is what a reconcile does, as both sides say it: the
// action ("restart", "none" or "rule=R" for a rule that makes no
// restart), the rule of a restart, the sources the template pins after
// it.
func verdictSays(action, rule string, pins []string) string {
	out := action
	switch {
	case rule != "" && action != "restart":
		out = "rule=" + rule
	case rule != "":
		out += " rule=" + rule
	}
	if len(pins) > 0 {
		slices.Sort(pins)
		out += " pins=" + strings.Join(pins, ",")
	}
	return out
}

// explainVerdict runs explain on the scene's objects, as read from the
// API server, with the pin facts the CLI reads.
func explainVerdict(t *testing.T, s pinScene) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, api, _ := s.setUp(t, ctx)
	var dep appsv1.Deployment
	if err := api.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "web"}, &dep); err != nil {
		t.Fatal(err)
	}
	nsKey := reviewHasher.NamespaceKey("ns")
	st := settings.Settings{Annotation: "require-restart", Discovery: plan.DiscoveryAll}
	es := explain.Settings{Resolver: st.Resolver(nil), Rules: st.Rules(), HashKeyID: nsKey.ID(), Pinning: true}
	w := explain.Workload{Object: &dep, Configs: map[string]explain.Config{}}
	for _, name := range []string{"cfg", "other"} {
		var cm corev1.ConfigMap
		if err := api.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, &cm); err != nil {
			continue
		}
		d, err := nsKey.OfObject(&cm)
		if err != nil {
			t.Fatal(err)
		}
		w.Configs["ConfigMap/"+name] = explain.Config{Kind: "ConfigMap", Namespace: "ns", Name: name, Found: true, Keys: d.Keys,
			Annotations: cm.Annotations, Labels: cm.Labels, Sum: d.Sum}
	}
	pins := optin.TemplatePins(optin.Of(&dep))
	for _, src := range pin.Sorted(pins) {
		err := api.Get(ctx, types.NamespacedName{Namespace: "ns", Name: pins[src]}, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}})
		if apierrors.IsNotFound(err) {
			w.Missing = append(w.Missing, src.Kind+" "+pins[src])
		}
	}
	rep, err := explain.ExplainWorkload(es, w)
	if err != nil || rep.Verdict == nil {
		t.Fatalf("explain: %v (action %s, notes %v)", err, rep.Action, rep.Notes)
	}
	var pinned []string
	if rep.Action == "restart" {
		pinned = slices.Clone(rep.Verdict.Pins)
	}
	rule := rep.Verdict.Rule
	if rule == verdict.RuleLeftByRollback && !rep.Verdict.Stale {
		rule = "" // a restart only the chain made (Repin), not made: nothing seen on the workload
	}
	return verdictSays(rep.Action, rule, pinned)
}

// controllerVerdict reconciles the scene and reads what was done from
// the Deployment and the Events.
func controllerVerdict(t *testing.T, s pinScene) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, api, rec := s.setUp(t, ctx)
	var before appsv1.Deployment
	if err := api.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "web"}, &before); err != nil {
		t.Fatal(err)
	}
	reconcileWeb(t, ctx, r)
	var got appsv1.Deployment
	if err := api.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "web"}, &got); err != nil {
		t.Fatal(err)
	}
	evs := strings.Join(drain(rec), "\n")
	_, restarted := got.Spec.Template.Annotations[plan.RestartAnnotation]
	action, rule := "none", ""
	switch {
	case restarted:
		action = "restart"
	case before.Annotations[plan.RecordAnnotation] != got.Annotations[plan.RecordAnnotation]:
		action = "refresh"
	}
	r.stale.mu.Lock()
	stale := r.stale.keys[object.Ref{Kind: "Deployment", Namespace: "ns", Name: "web"}]
	r.stale.mu.Unlock()
	tmplID := got.Spec.Template.Annotations[optin.ChangeSet]
	switch {
	case strings.Contains(evs, ReasonRolledBack):
		rule = verdict.RuleRolledBack
	case strings.Contains(evs, ReasonPinsStripped):
		rule = verdict.RuleRepin
	case stale && !restarted:
		rule = verdict.RuleLeftByRollback
	case !restarted && tmplID != "" && got.Annotations[optin.RecordedChangeSet] == tmplID && before.Annotations[optin.RecordedChangeSet] != tmplID:
		// The template's id recorded without a restart: a release seen,
		// with (InRelease) or without (ChangeSetSeen) changed sources.
		rule = verdict.RuleChangeSetSeen
		if before.Annotations[plan.RecordAnnotation] != got.Annotations[plan.RecordAnnotation] {
			rule = verdict.RuleInRelease
		}
	}
	var pinned []string
	if restarted {
		for src := range pin.Parse(got.Spec.Template.Annotations[pin.PinsAnnotation]) {
			pinned = append(pinned, src.ID())
		}
	}
	return verdictSays(action, rule, pinned)
}
