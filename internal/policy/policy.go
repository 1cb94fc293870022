// Package policy makes ReloadPolicies (api/v1alpha1) act: it keeps the
// policies of the watched namespaces in an Index, fed by an informer that
// runs only while the API server serves the CRD (Watcher); gives the
// workloads they select the references the policies name (Source, a
// resolve.Source); says what the policies that apply to a workload change
// in how it is restarted (Applied); and reports on each policy in its
// status (Status, StatusWriter).
//
// A policy applies to a workload of its namespace (never another: a target
// has no namespace):
//
//	targets        applies to                   references it adds
//	listed         each workload a target       a reference to each source
//	               selects (kind, and name or   named (every key, or the
//	               labels)                      keys listed), and to each
//	                                            object a source selector
//	                                            matches (by labels)
//	omitted        the sources' consumers: the  none
//	               workloads whose pod spec
//	               uses an object a source
//	               names or selects
//
// Where a policy applies, its settings do:
//
//	setting             effect on the workloads it applies to
//	sources[].keys      only these keys of the object count (the reference
//	                    is narrowed to them; keys the pods need still hold
//	                    a restart while missing)
//	(being applied)     the references it names count in the annotated
//	                    discovery mode (a target opts in)
//	strategy            the restart strategy, in place of
//	                    --restart-strategy; the workload's own
//	                    watcher.dev/restart-strategy annotation still wins
//	coalesce            changes of its sources are handled once they have
//	                    been held that long, counted from the first
//	settle, settleMax   a target's restart waits until its sources have
//	                    been quiet that long, at most settleMax (its own
//	                    watcher.dev/settle annotations still win)
//	dryRun              nothing is written: "would restart" is logged,
//	                    emitted as an Event and counted
//	maintenanceWindows  a restart waits until a window is open
//
// When several policies apply to one workload: the first strategy set, in
// order of policy name; dry run if any is; and a restart waits until every
// policy that has windows has one open.
package policy

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/api/v1alpha1"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/slim"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Policy is a ReloadPolicy read for use: selectors parsed, windows parsed.
type Policy struct {
	Namespace, Name string
	Generation      int64
	Sources         []Source
	// Targets are the workloads the policy restarts; nil: the consumers of
	// its sources.
	Targets []Target
	// Strategy names a restart strategy; "" for the default.
	Strategy string
	// Coalesce holds the changes of the sources this long; 0: not at all.
	Coalesce time.Duration
	// Settle and SettleMax are the targets' settle (package hold); 0: the
	// installation's.
	Settle, SettleMax time.Duration
	DryRun            bool
	// Pin pins the targets' config revisions (package pin).
	Pin bool
	// Windows are the maintenance windows that parse; WindowErrs those
	// that do not. A policy with an invalid window holds its restarts
	// until it is fixed: it never restarts outside the windows meant.
	Windows    Windows
	WindowErrs []*WindowError
	// SelectorErrs are the selectors that do not parse; such a selector
	// selects nothing.
	SelectorErrs []error
	// Refused says why the policy is over a limit (see MaxSources); such
	// a policy applies to nothing and is not parsed further. Nil: within
	// every limit.
	Refused error
}

// Source is one source of a policy: an object by name, or every object of
// the kind whose labels Selector matches.
type Source struct {
	Kind     refs.Kind
	Name     string
	Selector labels.Selector
	// Keys are the only keys that count, sorted; nil: every key.
	Keys []string
}

// Target is one target of a policy: a workload of Kind by name, or every
// workload of Kind whose labels Selector matches.
type Target struct {
	Kind     string
	Name     string
	Selector labels.Selector
	// key is selectorKey(Selector), when Compile made the target; "": not
	// worked out yet.
	key string
}

// same tells whether t and o select the same workloads, listed alike.
func (t Target) same(o Target) bool {
	return t.Kind == o.Kind && t.Name == o.Name && (t.Selector == nil) == (o.Selector == nil) &&
		(t.Selector == nil || t.selectorKey() == o.selectorKey())
}

// selectorKey returns selectorKey(t.Selector), worked out once by Compile.
func (t Target) selectorKey() string {
	if t.key != "" {
		return t.key
	}
	return selectorKey(t.Selector)
}

// Compile reads p. A policy over a limit is not parsed: it is returned
// with Refused set and nothing else it applies. What the API server cannot check (a selector's
// operator, a schedule, a time zone) is kept in SelectorErrs and
// WindowErrs, for the status to report.
func Compile(p *v1alpha1.ReloadPolicy) *Policy {
	out := &Policy{
		Namespace: p.Namespace, Name: p.Name, Generation: p.Generation,
		Strategy: string(p.Spec.Strategy), DryRun: p.Spec.DryRun, Pin: p.Spec.Pin,
	}
	if p.Spec.Coalesce != nil {
		out.Coalesce = p.Spec.Coalesce.Duration
	}
	if p.Spec.Settle != nil {
		out.Settle = p.Spec.Settle.Duration
	}
	if p.Spec.SettleMax != nil {
		out.SettleMax = p.Spec.SettleMax.Duration
	}
	if out.Refused = refused(p); out.Refused != nil {
		return out
	}
	// Equal selectors of one policy are parsed once (the informer makes
	// them one value: see Watcher.slim).
	parsed := map[*metav1.LabelSelector]parsedSelector{}
	byText := map[string]parsedSelector{}
	parse := func(s *metav1.LabelSelector) parsedSelector {
		if r, ok := parsed[s]; ok {
			return r
		}
		key := selectorText(s)
		r, ok := byText[key]
		if !ok {
			sel, err := selector(s)
			r = parsedSelector{sel, selectorKey(sel), err}
			byText[key] = r
		}
		parsed[s] = r
		return r
	}
	compiled := func(s *metav1.LabelSelector) (labels.Selector, error) {
		if s == nil {
			return nil, nil
		}
		r := parse(s)
		return r.sel, r.err
	}
	for i, s := range p.Spec.Sources {
		sel, err := compiled(s.Selector)
		if err != nil {
			out.SelectorErrs = append(out.SelectorErrs, fmt.Errorf("spec.sources[%d].selector: %w", i, err))
		}
		var keys []string
		if len(s.Keys) > 0 {
			keys = sortedSet(s.Keys)
		}
		out.Sources = append(out.Sources, Source{Kind: refs.Kind(s.Kind), Name: s.Name, Selector: sel, Keys: keys})
	}
	for i, t := range p.Spec.Targets {
		sel, err := compiled(t.Selector)
		if err != nil {
			out.SelectorErrs = append(out.SelectorErrs, fmt.Errorf("spec.targets[%d].selector: %w", i, err))
		}
		target := Target{Kind: string(t.Kind), Name: t.Name, Selector: sel}
		if sel != nil {
			target.key = parse(t.Selector).key
		}
		// A target listed twice selects nothing more: it is kept once.
		if !slices.ContainsFunc(out.Targets, target.same) {
			out.Targets = append(out.Targets, target)
		}
	}
	for i, w := range p.Spec.MaintenanceWindows {
		pw, err := ParseWindow(w)
		var we *WindowError
		if errors.As(err, &we) {
			we.Err = fmt.Errorf("spec.maintenanceWindows[%d]: %w", i, we.Err)
			out.WindowErrs = append(out.WindowErrs, we)
			continue
		}
		out.Windows = append(out.Windows, pw)
	}
	return out
}

// selector parses a label selector; nil selects nothing (a source or
// target by name). One that does not parse selects nothing.
func selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return labels.Nothing(), err
	}
	return sel, nil
}

// parsedSelector is a selector parsed, or why it does not parse.
type parsedSelector struct {
	sel labels.Selector
	key string // selectorKey(sel)
	err error
}

// selectorText tells label selectors apart: equal texts, equal selectors.
// Each string is written after its length, so that no key or value (the
// API server does not check those of a ReloadPolicy) can pass for two.
func selectorText(s *metav1.LabelSelector) string {
	var b strings.Builder
	str := func(v string) {
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	}
	if len(s.MatchLabels) == 1 {
		for k, v := range s.MatchLabels {
			str(k)
			str(v)
		}
	} else {
		for _, k := range slices.Sorted(maps.Keys(s.MatchLabels)) {
			str(k)
			str(s.MatchLabels[k])
		}
	}
	for _, e := range s.MatchExpressions {
		b.WriteByte(';')
		str(e.Key)
		str(string(e.Operator))
		b.WriteString(strconv.Itoa(len(e.Values)))
		for _, v := range e.Values {
			str(v)
		}
	}
	return b.String()
}

// Key returns "namespace/name".
func (p *Policy) Key() string { return p.Namespace + "/" + p.Name }

// Targeting tells whether p lists targets and one of them selects obj, a
// workload.
func (p *Policy) Targeting(obj client.Object) bool {
	if obj.GetNamespace() != p.Namespace || p.Targets == nil {
		return false
	}
	k, ok := workload.Of(obj)
	if !ok {
		return false
	}
	for _, t := range p.Targets {
		if t.Selects(k.Name(), obj.GetName(), slim.Labels(obj)) {
			return true
		}
	}
	return false
}

// Selects tells whether t selects the workload kind/name with labels lbls
// (nil: none).
func (t Target) Selects(kind, name string, lbls labels.Labels) bool {
	if t.Kind != kind {
		return false
	}
	if t.Selector == nil {
		return t.Name == name
	}
	return t.Selector.Matches(orNone(lbls))
}

// Names tells whether s names the object kind/name with labels lbls (nil:
// none).
func (s Source) Names(kind refs.Kind, name string, lbls labels.Labels) bool {
	if s.Kind != kind {
		return false
	}
	if s.Selector == nil {
		return s.Name == name
	}
	return s.Selector.Matches(orNone(lbls))
}

func orNone(l labels.Labels) labels.Labels {
	if l == nil {
		return labels.Set(nil)
	}
	return l
}

// target returns s as a Target, for the index (see view).
func (s Source) target() Target {
	return Target{Kind: string(s.Kind), Name: s.Name, Selector: s.Selector}
}

// ref returns the reference s makes to the object name: every key, or the
// keys listed; optional, since the pod spec may not use the object.
func (s Source) ref(name string) refs.Ref {
	return refs.Ref{Kind: s.Kind, Name: name, AllKeys: s.Keys == nil, Keys: s.Keys, Optional: true}
}
