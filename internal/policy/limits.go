package policy

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watcher-dev/watcher/api/v1alpha1"
)

// The limits of one policy, checked before anything of it is parsed. The
// CRD bounds sources and targets too (an older or edited CRD may not); the
// selectors it does not bound. A policy over a limit is refused whole: it
// applies to nothing, and its Ready condition says why (ReasonTooLarge).
// The number of policies is bounded by a ResourceQuota on
// count/reloadpolicies.watcher.dev (see docs/reloadpolicy.md).
//
//	what                                   at most
//	spec.sources                           MaxSources
//	spec.targets                           MaxTargets
//	requirements of one selector           MaxSelectorTerms
//	(matchLabels entries + matchExpressions)
//	values of one matchExpression          MaxSelectorValues
const (
	MaxSources        = 100
	MaxTargets        = 100
	MaxSelectorTerms  = 32
	MaxSelectorValues = 64
)

// ReasonTooLarge is the reason of the Ready condition of a policy over a
// limit.
const ReasonTooLarge = "TooLarge"

// refused returns why p is over a limit, or nil.
func refused(p *v1alpha1.ReloadPolicy) error {
	if n := len(p.Spec.Sources); n > MaxSources {
		return fmt.Errorf("spec.sources has %d entries, more than %d", n, MaxSources)
	}
	if n := len(p.Spec.Targets); n > MaxTargets {
		return fmt.Errorf("spec.targets has %d entries, more than %d", n, MaxTargets)
	}
	for i, s := range p.Spec.Sources {
		if err := selectorSize(s.Selector); err != nil {
			return fmt.Errorf("spec.sources[%d].selector: %w", i, err)
		}
	}
	for i, t := range p.Spec.Targets {
		if err := selectorSize(t.Selector); err != nil {
			return fmt.Errorf("spec.targets[%d].selector: %w", i, err)
		}
	}
	return nil
}

// selectorSize returns why s is over a limit, or nil.
func selectorSize(s *metav1.LabelSelector) error {
	if s == nil {
		return nil
	}
	if n := len(s.MatchLabels) + len(s.MatchExpressions); n > MaxSelectorTerms {
		return fmt.Errorf("%d requirements, more than %d", n, MaxSelectorTerms)
	}
	for i, e := range s.MatchExpressions {
		if n := len(e.Values); n > MaxSelectorValues {
			return fmt.Errorf("matchExpressions[%d] has %d values, more than %d", i, n, MaxSelectorValues)
		}
	}
	return nil
}
