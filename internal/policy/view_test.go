package policy

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/watcher-dev/watcher/api/v1alpha1"
	"github.com/watcher-dev/watcher/internal/packed"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/slim"
	"github.com/watcher-dev/watcher/internal/workload"
)

// deploy returns a Deployment of namespace shop as the API server has it
// (live: true) or as the store keeps it.
func deploy(name string, lbls map[string]string, live bool) *metav1.PartialObjectMetadata {
	o := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: lbls}}
	if !live {
		o.ObjectMeta = slim.Meta(o.ObjectMeta, nil)
		if o.Annotations == nil {
			o.Annotations = map[string]string{}
		}
		o.Annotations[workload.RefsAnnotation] = refs.Encode(nil)
	}
	return o
}

func names(ps []*Policy) []string {
	out := []string{}
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

func targetPolicy(name string, targets ...v1alpha1.Target) *Policy {
	return Compile(&v1alpha1.ReloadPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Generation: 1},
		Spec: v1alpha1.ReloadPolicySpec{Sources: []v1alpha1.Source{{Kind: "ConfigMap", Name: "cm"}}, Targets: targets}})
}

func sel(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

// TestIndexTargeting: one row per line of view's table (targets), and the
// cases selector keys must tell apart; each asked of a live and a stored
// workload, twice (the second from the cache).
func TestIndexTargeting(t *testing.T) {
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}
	many := map[string]string{}
	for i := 0; i <= MaxSelectorTerms; i++ {
		many[fmt.Sprintf("l%d", i)] = "v"
	}
	ix := NewIndex()
	for _, p := range []*Policy{
		targetPolicy("by-name", v1alpha1.Target{Kind: "Deployment", Name: "web"}),
		targetPolicy("by-name-other-kind", v1alpha1.Target{Kind: "StatefulSet", Name: "web"}),
		targetPolicy("by-label", v1alpha1.Target{Kind: "Deployment", Selector: sel("app", "web")}),
		targetPolicy("by-label-too", v1alpha1.Target{Kind: "Deployment", Selector: sel("app", "web")}, v1alpha1.Target{Kind: "Deployment", Name: "web"}),
		targetPolicy("everything", v1alpha1.Target{Kind: "Deployment", Selector: &metav1.LabelSelector{}}),
		targetPolicy("invalid", v1alpha1.Target{Kind: "Deployment", Selector: bad}),
		targetPolicy("refused", v1alpha1.Target{Kind: "Deployment", Selector: &metav1.LabelSelector{MatchLabels: many}}, v1alpha1.Target{Kind: "Deployment", Name: "web"}),
		Compile(&v1alpha1.ReloadPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "consumers"},
			Spec: v1alpha1.ReloadPolicySpec{Sources: []v1alpha1.Source{{Kind: "ConfigMap", Name: "web"}}}}),
	} {
		ix.Set(p)
	}
	tests := []struct {
		name   string
		lbls   map[string]string
		policy []string
	}{
		{"web", map[string]string{"app": "web"}, []string{"by-label", "by-label-too", "by-name", "everything"}},
		{"web", nil, []string{"by-label-too", "by-name", "everything"}},
		{"api", map[string]string{"app": "web", "tier": "x"}, []string{"by-label", "by-label-too", "everything"}},
		{"api", map[string]string{"app": "api"}, []string{"everything"}},
	}
	for _, tt := range tests {
		for _, live := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s %v live=%v", tt.name, tt.lbls, live), func(t *testing.T) {
				for range 2 {
					if got := names(ix.Targeting(deploy(tt.name, tt.lbls, live))); !slices.Equal(got, tt.policy) {
						t.Errorf("Targeting = %v, want %v", got, tt.policy)
					}
				}
			})
		}
	}

	// A change of the namespace's policies drops what was cached.
	ix.Set(targetPolicy("by-label", v1alpha1.Target{Kind: "Deployment", Selector: sel("app", "other")}))
	ix.Delete("shop", "everything")
	if got := names(ix.Targeting(deploy("api", map[string]string{"app": "web"}, false))); !slices.Equal(got, []string{"by-label-too"}) {
		t.Errorf("after changes: Targeting = %v, want [by-label-too]", got)
	}
	if got := names(ix.In("shop")); len(got) != 7 {
		t.Errorf("In = %v, want the 7 policies left, the refused one included", got)
	}
}

// TestIndexMatchesEveryPolicy: on random policies and workloads, changed
// at random, Index.Targeting and Index.For say what asking every policy
// (Policy.Targeting, and the sources of those without targets) says.
func TestIndexMatchesEveryPolicy(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	apps := []string{"a", "b", "c"}
	randSel := func() *metav1.LabelSelector {
		if rnd.IntN(4) == 0 {
			return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "In", Values: apps[:1+rnd.IntN(3)]}}}
		}
		if rnd.IntN(2) == 0 {
			return sel("app", apps[rnd.IntN(3)])
		}
		return sel("app", apps[rnd.IntN(3)], "tier", apps[rnd.IntN(3)])
	}
	randPolicy := func(i int) *Policy {
		spec := v1alpha1.ReloadPolicySpec{}
		for range 1 + rnd.IntN(3) {
			s := v1alpha1.Source{Kind: "ConfigMap", Name: fmt.Sprintf("cm%d", rnd.IntN(4))}
			if rnd.IntN(3) == 0 {
				s.Name, s.Selector = "", randSel()
			}
			spec.Sources = append(spec.Sources, s)
		}
		for range rnd.IntN(4) {
			tg := v1alpha1.Target{Kind: "Deployment", Name: fmt.Sprintf("w%d", rnd.IntN(5))}
			if rnd.IntN(2) == 0 {
				tg.Name, tg.Selector = "", randSel()
			}
			spec.Targets = append(spec.Targets, tg)
		}
		return Compile(&v1alpha1.ReloadPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprintf("p%02d", i)}, Spec: spec})
	}
	configs := fakeConfigs{}
	for i := range 4 {
		configs = append(configs, &metav1.PartialObjectMetadata{ObjectMeta: slim.Meta(metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprintf("cm%d", i),
			Labels: map[string]string{"app": apps[i%3], "tier": apps[(i+1)%3]}}, nil)})
	}
	ix := NewIndex()
	for round := range 300 {
		if i := rnd.IntN(30); rnd.IntN(4) == 0 {
			ix.Delete("shop", fmt.Sprintf("p%02d", i))
		} else {
			ix.Set(randPolicy(i))
		}
		lbls := map[string]string{"app": apps[rnd.IntN(3)], "tier": apps[rnd.IntN(3)]}
		obj := deploy(fmt.Sprintf("w%d", rnd.IntN(5)), lbls, rnd.IntN(2) == 0)
		spec := []refs.Ref{{Kind: refs.ConfigMap, Name: fmt.Sprintf("cm%d", rnd.IntN(5)), AllKeys: true}}
		if obj.Annotations == nil {
			obj.Annotations = map[string]string{}
		}
		obj.Annotations[workload.RefsAnnotation] = refs.Encode(spec)
		var wantT, wantFor []string
		for _, p := range ix.In("shop") {
			if p.Targeting(obj) {
				wantT = append(wantT, p.Name)
				wantFor = append(wantFor, p.Name)
				continue
			}
			if p.Targets != nil || p.Refused != nil {
				continue
			}
			uses, err := p.names(spec[0], &labelsOf{configs: configs, namespace: "shop"})
			if err != nil {
				t.Fatal(err)
			}
			if uses {
				wantFor = append(wantFor, p.Name)
			}
		}
		if got := names(ix.Targeting(obj)); !slices.Equal(got, orEmpty(wantT)) {
			t.Fatalf("round %d, %s %v: Targeting = %v, asking every policy: %v", round, obj.Name, lbls, got, wantT)
		}
		a, err := ix.For(obj, spec, configs)
		if err != nil {
			t.Fatal(err)
		}
		if got := names(a.Policies); !slices.Equal(got, orEmpty(wantFor)) {
			t.Fatalf("round %d, %s %v uses %s: For = %v, asking every policy: %v", round, obj.Name, lbls, spec[0].Name, got, wantFor)
		}
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// fakeConfigs are the ConfigMaps of namespace shop.
type fakeConfigs []*metav1.PartialObjectMetadata

func (f fakeConfigs) List(kind refs.Kind, _ string) ([]*packed.Object, error) {
	if kind != refs.ConfigMap {
		return nil, nil
	}
	return packed.PackAll(f), nil
}

// counting is a selector that counts the label sets it is asked about.
type counting struct {
	labels.Selector
	n *atomic.Int64
}

func (c counting) Matches(l labels.Labels) bool {
	c.n.Add(1)
	return c.Selector.Matches(l)
}

// TestEventWorkIsPerDistinctSelector: in a namespace of 500 policies of 52
// targets by selector (26 distinct selectors), a workload event (the
// store's transform: References.Annotate) asks each distinct selector
// once for a label set not seen before, and none for one seen before (a
// status update), instead of every target of every policy.
func TestEventWorkIsPerDistinctSelector(t *testing.T) {
	var asked atomic.Int64
	ix := NewIndex()
	for i := range 500 {
		var ts []Target
		for j := range 52 {
			sel, _ := selector(&metav1.LabelSelector{MatchLabels: map[string]string{"app": "x", "tier": string(rune('a' + j%26))}})
			ts = append(ts, Target{Kind: "Deployment", Selector: counting{sel, &asked}})
		}
		ix.Set(&Policy{Namespace: "shop", Name: fmt.Sprintf("p%d", i), Targets: ts, Sources: []Source{{Kind: refs.ConfigMap, Name: "cfg"}}})
	}
	r := References{Index: ix}
	for i, tt := range []struct {
		lbls map[string]string
		want int64
	}{
		{map[string]string{"app": "web"}, 26},
		{map[string]string{"app": "web"}, 0},
		{map[string]string{"app": "x", "tier": "b"}, 26},
		{map[string]string{"app": "x", "tier": "b"}, 0},
	} {
		asked.Store(0)
		obj := deploy("web", tt.lbls, false)
		r.Annotate(obj)
		if got := asked.Load(); got != tt.want {
			t.Errorf("event %d, labels %v: %d selectors asked, want %d", i, tt.lbls, got, tt.want)
		}
		if targeted := obj.Annotations[RefsAnnotation] != ""; targeted != (tt.lbls["tier"] == "b") {
			t.Errorf("event %d, labels %v: references %q", i, tt.lbls, obj.Annotations[RefsAnnotation])
		}
	}
}
