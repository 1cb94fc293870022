package policy

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watcher-dev/watcher/api/v1alpha1"
)

// TestCompileRefuses: one row per line of the limits' table, each just
// within and just over; a refused policy says why and applies to nothing.
func TestCompileRefuses(t *testing.T) {
	sources := func(n int) []v1alpha1.Source {
		out := make([]v1alpha1.Source, n)
		for i := range out {
			out[i] = v1alpha1.Source{Kind: "ConfigMap", Name: "cm"}
		}
		return out
	}
	targets := func(n int) []v1alpha1.Target {
		out := make([]v1alpha1.Target, n)
		for i := range out {
			out[i] = v1alpha1.Target{Kind: "Deployment", Name: "web"}
		}
		return out
	}
	terms := func(n int) *metav1.LabelSelector {
		s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
		for i := range n {
			s.MatchLabels[strings.Repeat("k", i+1)] = "v"
		}
		return s
	}
	values := func(n int) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "In", Values: make([]string, n)}}}
	}
	tests := []struct {
		name    string
		spec    v1alpha1.ReloadPolicySpec
		refused string
	}{
		{"sources at the limit", v1alpha1.ReloadPolicySpec{Sources: sources(MaxSources)}, ""},
		{"sources over", v1alpha1.ReloadPolicySpec{Sources: sources(MaxSources + 1)}, "spec.sources has 101 entries, more than 100"},
		{"targets at the limit", v1alpha1.ReloadPolicySpec{Sources: sources(1), Targets: targets(MaxTargets)}, ""},
		{"targets over", v1alpha1.ReloadPolicySpec{Sources: sources(1), Targets: targets(MaxTargets + 1)}, "spec.targets has 101 entries, more than 100"},
		{"selector terms at the limit", v1alpha1.ReloadPolicySpec{Sources: []v1alpha1.Source{{Kind: "Secret", Selector: terms(MaxSelectorTerms)}}}, ""},
		{"selector terms over", v1alpha1.ReloadPolicySpec{Sources: []v1alpha1.Source{{Kind: "Secret", Selector: terms(MaxSelectorTerms + 1)}}},
			"spec.sources[0].selector: 33 requirements, more than 32"},
		{"expression values at the limit", v1alpha1.ReloadPolicySpec{Sources: sources(1), Targets: []v1alpha1.Target{{Kind: "Deployment", Selector: values(MaxSelectorValues)}}}, ""},
		{"expression values over", v1alpha1.ReloadPolicySpec{Sources: sources(1), Targets: []v1alpha1.Target{{Kind: "Deployment", Selector: values(MaxSelectorValues + 1)}}},
			"spec.targets[0].selector: matchExpressions[0] has 65 values, more than 64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.spec.MaintenanceWindows = []v1alpha1.MaintenanceWindow{{Schedule: "0 2 * * *", Duration: metav1.Duration{Duration: time.Hour}}}
			p := Compile(&v1alpha1.ReloadPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p", Generation: 1}, Spec: tt.spec})
			got := ""
			if p.Refused != nil {
				got = p.Refused.Error()
			}
			if got != tt.refused {
				t.Fatalf("Refused = %q, want %q", got, tt.refused)
			}
			if tt.refused == "" {
				return
			}
			if p.Sources != nil || p.Targets != nil || p.Windows != nil {
				t.Errorf("a refused policy was parsed: %d sources, %d targets, %d windows", len(p.Sources), len(p.Targets), len(p.Windows))
			}
			c, err := Ready(p, stubStoreOf())
			if err != nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonTooLarge || !strings.HasPrefix(c.Message, tt.refused+"; the policy is ignored") {
				t.Errorf("Ready = %s %s %q, %v", c.Status, c.Reason, c.Message, err)
			}
			ix := NewIndex()
			ix.Set(p)
			if got := ix.Targeting(deploy("web", nil, false)); len(got) != 0 {
				t.Errorf("a refused policy targets web")
			}
		})
	}
}

func stubStoreOf() Workloads { return &stubStore{} }

// TestBackoff: the re-checks of a policy whose sources are missing.
func TestBackoff(t *testing.T) {
	tests := []struct {
		n    int
		want time.Duration
	}{
		{0, 2 * time.Second},
		{1, 4 * time.Second},
		{2, 8 * time.Second},
		{6, 128 * time.Second},
		{7, 256 * time.Second},
		{8, 5 * time.Minute},
		{1000, 5 * time.Minute},
	}
	for _, tt := range tests {
		if got := backoff(tt.n); got != tt.want {
			t.Errorf("backoff(%d) = %s, want %s", tt.n, got, tt.want)
		}
	}
}
