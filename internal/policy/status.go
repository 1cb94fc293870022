package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watcher-dev/watcher/api/v1alpha1"
	"github.com/watcher-dev/watcher/internal/packed"
	"github.com/watcher-dev/watcher/internal/slim"
	"github.com/watcher-dev/watcher/internal/workload"
)

// The Ready condition of a policy:
//
//	reason           status  when
//	TooLarge         False   the policy is over a limit (see MaxSources):
//	                         it applies to nothing until it is made smaller
//	InvalidSelector  False   a selector does not parse (it selects nothing)
//	InvalidSchedule  False   a window's schedule is no cron expression (the
//	                         policy's restarts are held until it is fixed)
//	InvalidTimeZone  False   a window's time zone is unknown (likewise)
//	SourcesNotFound  True    a source names no object yet (the message says
//	                         which); it counts once it appears
//	TargetsNotFound  True    a target names no workload yet; likewise
//	Valid            True    otherwise
const (
	ConditionReady          = "Ready"
	ReasonValid             = "Valid"
	ReasonSourcesNotFound   = "SourcesNotFound"
	ReasonTargetsNotFound   = "TargetsNotFound"
	ReasonInvalidSelector   = "InvalidSelector"
	ReasonMaintenanceWindow = "MaintenanceWindow"

	// ConditionPinned, on a policy with spec.pin, says whether its
	// targets' restarts pin their config: True (Pinned), or False
	// (PinningOff: --pinning is off, or its admission policy is not
	// installed; the message says which).
	ConditionPinned  = "Pinned"
	ReasonPinned     = "Pinned"
	ReasonPinningOff = "PinningOff"
)

// MaxLastRestarts bounds status.lastRestarts.
const MaxLastRestarts = 10

// Ready returns the Ready condition of p, whose sources and targets are
// looked up in st.
func Ready(p *Policy, st Workloads) (metav1.Condition, error) {
	return readyIn(p, st, newSelection(p.Namespace, st))
}

// readyIn returns the Ready condition of p, whose sources are looked up in
// st and targets in sel, a selection of p's namespace.
func readyIn(p *Policy, st Workloads, sel *selection) (metav1.Condition, error) {
	c := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: p.Generation}
	switch {
	case p.Refused != nil:
		c.Reason, c.Message = ReasonTooLarge, p.Refused.Error()+"; the policy is ignored until it is within the limits"
		return c, nil
	case len(p.SelectorErrs) > 0:
		c.Reason, c.Message = ReasonInvalidSelector, errors.Join(p.SelectorErrs...).Error()
		return c, nil
	case len(p.WindowErrs) > 0:
		var msgs []string
		for _, e := range p.WindowErrs {
			msgs = append(msgs, e.Error())
		}
		c.Reason = p.WindowErrs[0].Reason
		c.Message = strings.Join(msgs, "; ") + "; restarts of the policy's workloads are held until it is fixed"
		return c, nil
	}
	c.Status = metav1.ConditionTrue
	sources, err := missingSources(p, st)
	if err != nil {
		return c, err
	}
	targets, err := missingTargets(p, sel)
	if err != nil {
		return c, err
	}
	switch {
	case len(sources) > 0:
		c.Reason = ReasonSourcesNotFound
	case len(targets) > 0:
		c.Reason = ReasonTargetsNotFound
	default:
		c.Reason, c.Message = ReasonValid, "the policy applies"
		return c, nil
	}
	c.Message = strings.Join(append(sources, targets...), "; ") + " yet; the policy applies to them once they do"
	return c, nil
}

// missingSources says which sources of p name no object of st.
func missingSources(p *Policy, st Workloads) ([]string, error) {
	var out []string
	for _, s := range p.Sources {
		if s.Selector == nil {
			obj, err := st.Get(string(s.Kind), p.Namespace, s.Name)
			if err != nil {
				return nil, err
			}
			if obj == nil {
				out = append(out, fmt.Sprintf("%s %s does not exist", s.Kind, s.Name))
			}
			continue
		}
		objs, err := st.List(s.Kind, p.Namespace)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(objs, func(o *packed.Object) bool { return s.Selector.Matches(slim.Labels(o)) }) {
			out = append(out, fmt.Sprintf("no %s matches %s", s.Kind, s.Selector))
		}
	}
	return out, nil
}

// missingTargets says which targets of p select no workload of sel.
func missingTargets(p *Policy, sel *selection) ([]string, error) {
	var out []string
	for _, t := range p.Targets {
		keys, err := sel.of(t)
		if err != nil {
			return nil, err
		}
		switch {
		case len(keys) > 0:
		case t.Selector == nil:
			out = append(out, fmt.Sprintf("%s %s does not exist", t.Kind, t.Name))
		default:
			out = append(out, fmt.Sprintf("no %s matches %s", t.Kind, t.Selector))
		}
	}
	return out, nil
}

// Journal is what one replica did for a policy's workloads since it last
// wrote the policy's status.
type Journal struct {
	// Restarts the replica wrote.
	Restarts []v1alpha1.Restart
	// Held are the workloads whose restart a window holds, with when the
	// replica first held each; Released those it no longer holds.
	Held     map[workload.Key]time.Time
	Released map[workload.Key]bool
}

// held returns since when j holds k; j may be nil.
func (j *Journal) held(k workload.Key) (time.Time, bool) {
	if j == nil {
		return time.Time{}, false
	}
	t, ok := j.Held[k]
	return t, ok
}

// empty tells whether j holds nothing.
func (j *Journal) empty() bool {
	return j == nil || len(j.Restarts) == 0 && len(j.Held) == 0 && len(j.Released) == 0
}

// Desired returns the status p should have: cur, the status as last read,
// with ready as its Ready condition and j applied. Pending entries of
// workloads that selected (the workloads p selects now) lacks are dropped,
// and lastRestarts keeps the MaxLastRestarts latest. The result depends
// only on its inputs and keeps what other replicas wrote, so that replicas
// writing in turn converge (see StatusWriter).
func Desired(p *Policy, cur v1alpha1.ReloadPolicyStatus, ready metav1.Condition, j *Journal, selected []workload.Key) v1alpha1.ReloadPolicyStatus {
	out := v1alpha1.ReloadPolicyStatus{ObservedGeneration: p.Generation}
	out.Conditions = slices.Clone(cur.Conditions)
	meta.SetStatusCondition(&out.Conditions, ready)
	if j == nil {
		j = &Journal{}
	}
	in := map[workload.Key]bool{}
	for _, k := range selected {
		in[k] = true
	}
	seen := map[workload.Key]bool{}
	for _, e := range cur.Pending {
		k := workload.Key{Kind: string(e.Kind), Namespace: p.Namespace, Name: e.Name}
		if j.Released[k] || !in[k] || seen[k] {
			continue
		}
		seen[k] = true
		out.Pending = append(out.Pending, e)
	}
	for k, since := range j.Held {
		if !seen[k] && in[k] && !j.Released[k] {
			out.Pending = append(out.Pending, v1alpha1.PendingRestart{
				Kind: v1alpha1.TargetKind(k.Kind), Name: k.Name, Since: metav1.NewTime(since.UTC().Truncate(time.Second)), Reason: ReasonMaintenanceWindow,
			})
		}
	}
	slices.SortFunc(out.Pending, func(a, b v1alpha1.PendingRestart) int {
		return strings.Compare(string(a.Kind)+"/"+a.Name, string(b.Kind)+"/"+b.Name)
	})
	out.LastRestarts = lastRestarts(cur.LastRestarts, j.Restarts)
	return out
}

// lastRestarts merges two lists of restarts: each once, latest first, at
// most MaxLastRestarts.
func lastRestarts(a, b []v1alpha1.Restart) []v1alpha1.Restart {
	var out []v1alpha1.Restart
	for _, r := range slices.Concat(a, b) {
		r.At = metav1.NewTime(r.At.UTC().Truncate(time.Second))
		if !slices.ContainsFunc(out, func(o v1alpha1.Restart) bool {
			return o.Kind == r.Kind && o.Name == r.Name && o.At.Equal(&r.At)
		}) {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(x, y v1alpha1.Restart) int {
		if c := y.At.Compare(x.At.Time); c != 0 {
			return c
		}
		return strings.Compare(string(x.Kind)+"/"+x.Name, string(y.Kind)+"/"+y.Name)
	})
	if len(out) > MaxLastRestarts {
		out = out[:MaxLastRestarts]
	}
	return out
}

// Equal tells whether two statuses say the same (a condition's
// lastTransitionTime included: SetStatusCondition keeps it while the
// status holds).
func Equal(a, b v1alpha1.ReloadPolicyStatus) bool {
	return equality.Semantic.DeepEqual(a, b)
}

// metaTime returns t as the status holds it: UTC, whole seconds.
func metaTime(t time.Time) metav1.Time { return metav1.NewTime(t.UTC().Truncate(time.Second)) }
