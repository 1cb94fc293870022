package policy

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/watcher-dev/watcher/api/v1alpha1"
	"github.com/watcher-dev/watcher/internal/packed"
)

// listing is a store of Deployments of shop that counts its lists.
type listing struct {
	stubStore
	deployments []*metav1.PartialObjectMetadata
	lists       int
}

func (l *listing) Workloads(string, string) ([]*packed.Object, error) {
	l.lists++
	return packed.PackAll(l.deployments), nil
}

// TestSelected: a policy's targets by selector list the namespace's
// workloads once per kind and each distinct selector once, and each
// selected workload is returned once.
func TestSelected(t *testing.T) {
	st := &listing{}
	for i := range 4 {
		st.deployments = append(st.deployments, deploy(fmt.Sprintf("d%d", i), map[string]string{"tier": fmt.Sprint(i % 2)}, false))
	}
	var targets []v1alpha1.Target
	for j := range 50 {
		targets = append(targets, v1alpha1.Target{Kind: "Deployment", Selector: sel("tier", fmt.Sprint(j%2))})
	}
	targets = append(targets, v1alpha1.Target{Kind: "Deployment", Name: "web"}) // stubStore has web
	got, err := Selected(targetPolicy("p", targets...), st)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, k := range got {
		names = append(names, k.Name)
	}
	slices.Sort(names)
	if want := []string{"d0", "d1", "d2", "d3", "web"}; !slices.Equal(names, want) || st.lists != 1 {
		t.Errorf("Selected = %v after %d lists; want %v after 1", names, st.lists, want)
	}
	c, err := Ready(targetPolicy("p", targets...), st)
	if err != nil || c.Reason != ReasonSourcesNotFound || st.lists != 2 {
		t.Errorf("Ready = %s %q after %d lists in all, %v", c.Reason, c.Message, st.lists, err)
	}
}

// TestIndexSelected: the workloads that the policies of a namespace apply
// to (their initial list applied at once) are found in one selection: the
// Deployments listed once, each distinct selector asked once however many
// policies list it; a target by name and a selector of no workload add
// nothing twice; a policy without targets adds its sources' consumers.
func TestIndexSelected(t *testing.T) {
	st := &listing{}
	for i := range 4 {
		st.deployments = append(st.deployments, deploy(fmt.Sprintf("d%d", i), map[string]string{"tier": fmt.Sprint(i % 2)}, false))
	}
	ix := NewIndex()
	for i := range 20 {
		ix.Set(targetPolicy(fmt.Sprintf("p%d", i),
			v1alpha1.Target{Kind: "Deployment", Selector: sel("tier", fmt.Sprint(i%2))},
			v1alpha1.Target{Kind: "Deployment", Selector: sel("tier", "none")},
			v1alpha1.Target{Kind: "Deployment", Name: "web"}))
	}
	var asked atomic.Int64
	for _, g := range ix.byNS["shop"].targetSels["Deployment"] {
		g.sel = counting{g.sel, &asked}
	}
	got, err := ix.selected("shop", st)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, k := range got {
		names = append(names, k.Name)
	}
	slices.Sort(names)
	if want := []string{"d0", "d1", "d2", "d3", "web"}; !slices.Equal(names, want) || st.lists != 1 || asked.Load() != 3*4 {
		t.Errorf("selected = %v after %d lists and %d selector matches; want %v after 1 and 12 (3 selectors x 4 Deployments)",
			names, st.lists, asked.Load(), want)
	}
	if got, err := NewIndex().selected("shop", st); err != nil || len(got) != 0 {
		t.Errorf("selected of a namespace without policies = %v, %v", got, err)
	}
}

// TestEqualSelectorsShared: equal selectors of a namespace's policies, and
// of one policy, are one value (2,000 policies of 100 targets on 26
// selectors hold 26), a target listed twice is kept once, and a policy
// removed leaves the others' intact.
func TestEqualSelectorsShared(t *testing.T) {
	ix := NewIndex()
	a := targetPolicy("a", v1alpha1.Target{Kind: "Deployment", Selector: sel("tier", "x")}, v1alpha1.Target{Kind: "StatefulSet", Selector: sel("tier", "x")},
		v1alpha1.Target{Kind: "Deployment", Selector: sel("tier", "x")})
	if len(a.Targets) != 2 {
		t.Errorf("a target listed twice is kept %d times in all, want once: %v", len(a.Targets)-1, a.Targets)
	}
	b := targetPolicy("b", v1alpha1.Target{Kind: "Deployment", Selector: sel("tier", "x")}, v1alpha1.Target{Kind: "Deployment", Selector: sel("tier", "y")})
	// A parsed selector is a slice: one value, one backing array.
	same := func(x, y labels.Selector) bool { return reflect.ValueOf(x).Pointer() == reflect.ValueOf(y).Pointer() }
	if !same(a.Targets[0].Selector, a.Targets[1].Selector) {
		t.Error("equal selectors of one policy parsed twice")
	}
	ix.Set(a)
	ix.Set(b)
	if !same(b.Targets[0].Selector, a.Targets[0].Selector) || same(b.Targets[1].Selector, a.Targets[0].Selector) {
		t.Error("equal selectors of two policies not shared, or unequal ones shared")
	}
	ix.Delete("shop", "a")
	web := deploy("web", map[string]string{"tier": "x"}, false)
	if got := names(ix.Targeting(web)); !slices.Equal(got, []string{"b"}) {
		t.Errorf("Targeting after a's removal = %v; want [b]", got)
	}
}

// TestStatusWriterSharesSelection: the Ready conditions of 50 policies
// worked out by the status writer within selectionTTL list the
// namespace's Deployments once, not once per policy; after selectionTTL
// they are listed again (a target that appeared is seen).
func TestStatusWriterSharesSelection(t *testing.T) {
	st := &listing{}
	st.deployments = append(st.deployments, deploy("d0", map[string]string{"tier": "0"}, false))
	s := &StatusWriter{watcher: &Watcher{Store: st}}
	ready := func(i int) string {
		p := targetPolicy(fmt.Sprintf("p%d", i), v1alpha1.Target{Kind: "Deployment", Selector: sel("tier", fmt.Sprint(i%2))})
		c, err := readyIn(p, st, s.selection("shop"))
		if err != nil {
			t.Fatal(err)
		}
		return c.Message
	}
	for i := range 50 {
		ready(i)
	}
	if st.lists != 1 {
		t.Errorf("50 policies listed the Deployments %d times, want once", st.lists)
	}
	st.deployments = append(st.deployments, deploy("d1", map[string]string{"tier": "1"}, false))
	time.Sleep(selectionTTL)
	if msg := ready(1); st.lists != 2 || strings.Contains(msg, "Deployment") {
		t.Errorf("after %s: %d lists, %q; want 2 and the target found (only the source missing)", selectionTTL, st.lists, msg)
	}
}

// TestSelectorText: selectors that differ have different texts, however
// their keys and values are cut; equal ones (matchLabels in any order)
// have the same.
func TestSelectorText(t *testing.T) {
	expr := func(key string, values ...string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: metav1.LabelSelectorOpIn, Values: values}}}
	}
	distinct := []*metav1.LabelSelector{
		{}, sel("a", "b"), sel("a", "b", "c", "d"), sel("a", "b3:c", "d", ""), sel("a", "b1:c"), sel("a1:b", ""),
		expr("a", "b", "c"), expr("a", "bc"), expr("a", "b"), expr("a"),
		{MatchLabels: map[string]string{"a": "b"}, MatchExpressions: expr("c", "d").MatchExpressions},
	}
	seen := map[string]int{}
	for i, s := range distinct {
		text := selectorText(s)
		if j, ok := seen[text]; ok {
			t.Errorf("selectors %d and %d have the same text %q", j, i, text)
		}
		seen[text] = i
	}
	if a, b := selectorText(sel("a", "1", "b", "2")), selectorText(sel("b", "2", "a", "1")); a != b {
		t.Errorf("equal selectors: %q, %q", a, b)
	}
}
