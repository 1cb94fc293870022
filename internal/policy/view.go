package policy

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/workload"
)

// maxCached bounds the selector results a namespace keeps (one per
// distinct label set and kind): past it, the cache starts again empty.
const maxCached = 4096

// view holds the policies of one namespace, indexed when a policy changes
// so that asking which policies select a workload (or use an object)
// costs work proportional to the policies that do, not to every policy of
// the namespace times its targets:
//
//	policy part               indexed as                    asked with
//	target by name            policies by "Kind/name"       one map lookup
//	target by selector        policies by distinct          each distinct selector of the
//	                          (kind, selector)              kind once per label set, the
//	                                                        answer cached by the labels
//	source by name (policies  policies by "Kind/name"       one map lookup per reference
//	without targets)
//	source by selector (same) policies by distinct          as target selectors
//	                          (kind, selector)
//
// The cache, and the texts Annotate records per workload and label set
// (Index.recorded), are dropped whenever a policy of the namespace
// changes. A
// refused policy (Policy.Refused) is held, for its status, but indexed
// nowhere: it applies to nothing. The Index's lock guards every field but
// sorted and cache, which mu guards (they are filled by readers).
type view struct {
	policies map[string]*Policy
	// targets: the policies that list targets.
	targetNames map[string]map[string]bool
	targetSels  map[string]map[string]*group // kind -> selector key
	// sources: the policies that list no targets (they apply to their
	// sources' consumers).
	sourceNames map[string]map[string]bool
	sourceSels  map[string]map[string]*group
	// coalescing are the policies with a coalesce.
	coalescing map[string]*Policy

	mu      sync.Mutex
	sorted  []*Policy
	cache   map[cacheKey][]string
	records map[recordKey]record
}

// recordKey names a workload with a label set.
type recordKey struct {
	kind, name string
	labels     labelsText
}

// cacheKey names one answer of selected: of the target (or source)
// selectors of kind, for a label set.
type cacheKey struct {
	sources bool
	kind    string
	labels  labelsText
}

// labelsText tells label sets apart: the text the store keeps them in
// (stored) or the labels printed.
type labelsText struct {
	stored bool
	text   string
}

// group is the policies that share one selector of one kind.
type group struct {
	sel labels.Selector
	// policies counts, per policy name, its targets or sources with sel.
	policies map[string]int
}

func newView() *view {
	return &view{
		policies:    map[string]*Policy{},
		targetNames: map[string]map[string]bool{}, targetSels: map[string]map[string]*group{},
		sourceNames: map[string]map[string]bool{}, sourceSels: map[string]map[string]*group{},
		coalescing: map[string]*Policy{},
	}
}

// add indexes p, which the view must not hold.
func (v *view) add(p *Policy) {
	v.policies[p.Name] = p
	v.changed()
	if p.Refused != nil {
		return
	}
	if p.Coalesce > 0 {
		v.coalescing[p.Name] = p
	}
	// Equal selectors of the namespace's policies share one value (that
	// of their group): 2,000 policies of 100 targets on 26 selectors hold
	// 26 selectors, not 200,000.
	if p.Targets != nil {
		for i, t := range p.Targets {
			p.Targets[i].Selector = v.index(v.targetNames, v.targetSels, t, p.Name, 1)
		}
		return
	}
	for i, s := range p.Sources {
		p.Sources[i].Selector = v.index(v.sourceNames, v.sourceSels, s.target(), p.Name, 1)
	}
}

// remove forgets the policy name, if the view holds it.
func (v *view) remove(name string) {
	p := v.policies[name]
	if p == nil {
		return
	}
	delete(v.policies, name)
	delete(v.coalescing, name)
	v.changed()
	if p.Refused != nil {
		return
	}
	for _, t := range p.Targets {
		v.index(v.targetNames, v.targetSels, t, name, -1)
	}
	if p.Targets == nil {
		for _, s := range p.Sources {
			v.index(v.sourceNames, v.sourceSels, s.target(), name, -1)
		}
	}
}

// changed drops what readers derived from the policies.
func (v *view) changed() {
	v.mu.Lock()
	v.sorted, v.cache, v.records = nil, nil, nil
	v.mu.Unlock()
}

// index adds (delta 1) or removes (-1) the policy to or from the entry of
// t, a target or source: by name, or by selector. It returns the selector
// of the entry (equal to t's): nil for one by name.
func (v *view) index(names map[string]map[string]bool, sels map[string]map[string]*group, t Target, policy string, delta int) labels.Selector {
	kind, name, sel := t.Kind, t.Name, t.Selector
	if sel == nil {
		k := kind + "/" + name
		if delta > 0 {
			if names[k] == nil {
				names[k] = map[string]bool{}
			}
			names[k][policy] = true
			return nil
		}
		delete(names[k], policy)
		if len(names[k]) == 0 {
			delete(names, k)
		}
		return nil
	}
	key := t.selectorKey()
	byKind := sels[kind]
	if byKind == nil {
		byKind = map[string]*group{}
		sels[kind] = byKind
	}
	g := byKind[key]
	if g == nil {
		g = &group{sel: sel, policies: map[string]int{}}
		byKind[key] = g
	}
	if g.policies[policy] += delta; g.policies[policy] <= 0 {
		delete(g.policies, policy)
	}
	if len(g.policies) == 0 {
		delete(byKind, key)
	}
	if len(byKind) == 0 {
		delete(sels, kind)
	}
	return g.sel
}

// selectorKey tells selectors apart by what they select: a selector that
// selects everything and one that selects nothing print alike.
func selectorKey(sel labels.Selector) string {
	return strconv.FormatBool(sel.Empty()) + "\x00" + sel.String()
}

// targeting returns the names of the policies with a target that selects
// the workload kind/name whose labels are lbls, lkey their text.
func (v *view) targeting(kind, name string, lbls labels.Labels, lkey labelsText) []string {
	out := v.selected(cacheKey{kind: kind, labels: lkey}, v.targetSels[kind], lbls)
	return union(out, v.targetNames[kind+"/"+name])
}

// using returns the names of the policies without targets whose sources
// name the object kind/name, whose labels get reads (only when a source
// selector of kind asks).
func (v *view) using(kind refs.Kind, name string, get func() (labels.Labels, labelsText, error)) ([]string, error) {
	var out []string
	if sels := v.sourceSels[string(kind)]; len(sels) > 0 {
		lbls, lkey, err := get()
		if err != nil {
			return nil, err
		}
		out = v.selected(cacheKey{sources: true, kind: string(kind), labels: lkey}, sels, lbls)
	}
	return union(out, v.sourceNames[string(kind)+"/"+name]), nil
}

// selected returns the names of the policies of the groups whose selector
// matches lbls, sorted, from the cache under key when it holds them.
func (v *view) selected(key cacheKey, groups map[string]*group, lbls labels.Labels) []string {
	if len(groups) == 0 {
		return nil
	}
	v.mu.Lock()
	out, ok := v.cache[key]
	v.mu.Unlock()
	if ok {
		return out
	}
	lbls = orNone(lbls)
	for _, g := range groups {
		if g.sel.Matches(lbls) {
			for p := range g.policies {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	v.mu.Lock()
	if v.cache == nil || len(v.cache) >= maxCached {
		v.cache = map[cacheKey][]string{}
	}
	v.cache[key] = out
	v.mu.Unlock()
	return out
}

// union returns the names of a (sorted, read only) and of b, sorted, each
// once.
func union(a []string, b map[string]bool) []string {
	if len(b) == 0 {
		return a
	}
	out := slices.Clone(a)
	for n := range b {
		if _, found := slices.BinarySearch(a, n); !found {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// all returns the policies of the view, sorted by name (read only).
func (v *view) all() []*Policy {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.sorted == nil {
		v.sorted = make([]*Policy, 0, len(v.policies))
		for _, p := range v.policies {
			v.sorted = append(v.sorted, p)
		}
		slices.SortFunc(v.sorted, func(a, b *Policy) int { return strings.Compare(a.Name, b.Name) })
	}
	return v.sorted
}

// get returns the policies named, in that order; a name the view no longer
// holds is left out.
func (v *view) get(names []string) []*Policy {
	out := make([]*Policy, 0, len(names))
	for _, n := range names {
		if p := v.policies[n]; p != nil {
			out = append(out, p)
		}
	}
	return out
}

// recorded returns what Annotate records on obj, a workload: build's
// answer for the policies targeting it, kept until the policies of its
// namespace change (at most maxCached per namespace).
func (ix *Index) recorded(obj client.Object, build func([]*Policy) record) record {
	if ix == nil {
		return record{}
	}
	k, ok := workload.Of(obj)
	if !ok {
		return record{}
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	v := ix.byNS[obj.GetNamespace()]
	if v == nil {
		return record{}
	}
	lbls, lkey := labelsKey(obj)
	key := recordKey{kind: k.Name(), name: obj.GetName(), labels: lkey}
	v.mu.Lock()
	rec, ok := v.records[key]
	v.mu.Unlock()
	if ok {
		return rec
	}
	rec = build(v.get(v.targeting(key.kind, key.name, lbls, lkey)))
	v.mu.Lock()
	if v.records == nil || len(v.records) >= maxCached {
		v.records = map[recordKey]record{}
	}
	v.records[key] = rec
	v.mu.Unlock()
	return rec
}
