package integration

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/watcher-dev/watcher/api/v1alpha1"
	"github.com/watcher-dev/watcher/test/fixture"
)

var (
	policyOnce   sync.Once
	policyClient client.Client
	policyErr    error
)

// policies installs the CRDs of deploy/crds/ (once, for every test of the
// package) and returns a client that knows the watcher.dev types. The shared
// TestMain stays as it is: only the tests that need the CRD pay for it.
func policies(t *testing.T) client.Client {
	t.Helper()
	policyOnce.Do(func() {
		_, policyErr = envtest.InstallCRDs(restConfig, envtest.CRDInstallOptions{
			Paths:              []string{filepath.Join("..", "..", "deploy", "crds")},
			ErrorIfPathMissing: true,
		})
		if policyErr != nil {
			return
		}
		s := runtime.NewScheme()
		if policyErr = v1alpha1.AddToScheme(s); policyErr != nil {
			return
		}
		policyClient, policyErr = client.New(restConfig, client.Options{Scheme: s})
	})
	if policyErr != nil {
		t.Fatalf("install the CRDs of deploy/crds: %v", policyErr)
	}
	return policyClient
}

// validPolicy is the AppConfig-style example; each case of
// TestPolicyCRDValidation breaks one thing of it.
func validPolicy(ns, name string) *v1alpha1.ReloadPolicy {
	return &v1alpha1.ReloadPolicy{
		ObjectMeta: fixture.Meta(ns, name),
		Spec: v1alpha1.ReloadPolicySpec{
			Sources: []v1alpha1.Source{
				{Kind: v1alpha1.SourceConfigMap, Name: "shared-settings", Keys: []string{"LOG_LEVEL"}},
				{Kind: v1alpha1.SourceSecret, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "api"}}},
			},
			Targets: []v1alpha1.Target{
				{Kind: v1alpha1.TargetDeployment, Name: "api"},
				{Kind: v1alpha1.TargetRollout, Selector: &metav1.LabelSelector{}},
			},
			Strategy: v1alpha1.StrategyAnnotation,
			Coalesce: &metav1.Duration{Duration: 30 * time.Second},
			MaintenanceWindows: []v1alpha1.MaintenanceWindow{
				{Schedule: "0 2 * * *", Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "Europe/Berlin"},
				{Schedule: "*/15 1-5 1,15 JAN-MAR MON-FRI", Duration: metav1.Duration{Duration: 90 * time.Second}},
			},
			DryRun: true,
		},
	}
}

// TestPolicyCRDValidation: the API server accepts a valid ReloadPolicy and
// rejects each invalid one with a message saying what is wrong.
func TestPolicyCRDValidation(t *testing.T) {
	t.Parallel()
	c := policies(t)
	ns := namespace(t)
	const xor = ": Invalid value: set exactly one of name or selector"
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
	cases := []struct {
		name   string
		mutate func(p *v1alpha1.ReloadPolicy)
		// raw, when set, edits the object as JSON, for values the Go types
		// cannot hold.
		raw  func(u map[string]any)
		want string // "" when the policy is valid
	}{
		{name: "the issue's example", mutate: func(*v1alpha1.ReloadPolicy) {}},
		{name: "one source by name, nothing else", mutate: func(p *v1alpha1.ReloadPolicy) {
			p.Spec = v1alpha1.ReloadPolicySpec{Sources: []v1alpha1.Source{{Kind: v1alpha1.SourceSecret, Name: "s"}}}
		}},
		{name: "source with name and selector", want: "spec.sources[0]" + xor, mutate: func(p *v1alpha1.ReloadPolicy) {
			p.Spec.Sources[0].Selector = selector
		}},
		{name: "source with neither name nor selector", want: "spec.sources[0]" + xor, mutate: func(p *v1alpha1.ReloadPolicy) {
			p.Spec.Sources[0].Name = ""
		}},
		{name: "target with name and selector", want: "spec.targets[0]" + xor, mutate: func(p *v1alpha1.ReloadPolicy) {
			p.Spec.Targets[0].Selector = selector
		}},
		{name: "target with neither name nor selector", want: "spec.targets[1]" + xor, mutate: func(p *v1alpha1.ReloadPolicy) {
			p.Spec.Targets[1].Selector = nil
		}},
		{name: "source of a kind that is no config", want: `spec.sources[0].kind: Unsupported value: "Pod"`, mutate: func(p *v1alpha1.ReloadPolicy) {
			p.Spec.Sources[0].Kind = "Pod"
		}},
		{name: "target of a kind watcher does not restart", want: `spec.targets[0].kind: Unsupported value: "Job"`, mutate: func(p *v1alpha1.ReloadPolicy) {
			p.Spec.Targets[0].Kind = "Job"
		}},
		{name: "unknown strategy", want: `spec.strategy: Unsupported value: "rollout"`, mutate: func(p *v1alpha1.ReloadPolicy) {
			p.Spec.Strategy = "rollout"
		}},
		{name: "zero coalesce", want: "coalesce must be a positive duration", mutate: func(p *v1alpha1.ReloadPolicy) {
			p.Spec.Coalesce = &metav1.Duration{}
		}},
		{name: "negative coalesce", want: "coalesce must be a positive duration", mutate: func(p *v1alpha1.ReloadPolicy) {
			p.Spec.Coalesce = &metav1.Duration{Duration: -5 * time.Second}
		}},
		{name: "coalesce that is no duration", want: "coalesce must be a positive duration", raw: func(u map[string]any) {
			u["spec"].(map[string]any)["coalesce"] = "soon"
		}},
		{name: "zero window duration", want: "duration must be positive", mutate: func(p *v1alpha1.ReloadPolicy) {
			p.Spec.MaintenanceWindows[0].Duration = metav1.Duration{}
		}},
		{name: "cron of 4 fields", want: "schedule must be a cron expression of 5 fields", mutate: func(p *v1alpha1.ReloadPolicy) {
			p.Spec.MaintenanceWindows[0].Schedule = "0 2 * *"
		}},
		{name: "cron of 6 fields", want: "schedule must be a cron expression of 5 fields", mutate: func(p *v1alpha1.ReloadPolicy) {
			p.Spec.MaintenanceWindows[0].Schedule = "0 0 2 * * *"
		}},
		{name: "cron with other characters", want: "schedule must be a cron expression of 5 fields", mutate: func(p *v1alpha1.ReloadPolicy) {
			p.Spec.MaintenanceWindows[0].Schedule = "0 2 * * $(date)"
		}},
		{name: "time zone that is no IANA name", want: "spec.maintenanceWindows[0].timeZone: Invalid value", mutate: func(p *v1alpha1.ReloadPolicy) {
			p.Spec.MaintenanceWindows[0].TimeZone = "../etc/passwd"
		}},
		{name: "no sources", want: "spec.sources: Required value", mutate: func(p *v1alpha1.ReloadPolicy) {
			p.Spec.Sources = nil
		}},
		{name: "empty sources", want: "spec.sources in body should have at least 1 items", mutate: func(p *v1alpha1.ReloadPolicy) {
			p.Spec.Sources = []v1alpha1.Source{}
		}},
		{name: "100 sources", mutate: func(p *v1alpha1.ReloadPolicy) {
			p.Spec.Sources = manySources(100)
		}},
		{name: "101 sources", want: "spec.sources: Too many: 101: must have at most 100 items", mutate: func(p *v1alpha1.ReloadPolicy) {
			p.Spec.Sources = manySources(101)
		}},
		{name: "key that no ConfigMap may hold", want: "spec.sources[0].keys[0]: Invalid value", mutate: func(p *v1alpha1.ReloadPolicy) {
			p.Spec.Sources[0].Keys = []string{"a/b"}
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := validPolicy(ns, fmt.Sprintf("p%d", i))
			if tc.mutate != nil {
				tc.mutate(p)
			}
			var obj client.Object = p
			if tc.raw != nil {
				m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
				g.Expect(err).NotTo(HaveOccurred())
				tc.raw(m)
				u := &unstructured.Unstructured{Object: m}
				u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("ReloadPolicy"))
				obj = u
			}
			err := c.Create(t.Context(), obj)
			if tc.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
		})
	}
}

// TestPolicyCRDStatus: the status is a subresource: written through it, it
// sticks and leaves the generation alone; written with the object, it is
// ignored.
func TestPolicyCRDStatus(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	c := policies(t)
	p := validPolicy(namespace(t), "status")
	g.Expect(c.Create(t.Context(), p)).To(Succeed())
	gen := p.Generation

	at := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	want := v1alpha1.ReloadPolicyStatus{
		ObservedGeneration: gen,
		Conditions: []metav1.Condition{{
			Type: "Ready", Status: metav1.ConditionTrue, Reason: "Valid", Message: "ok",
			ObservedGeneration: gen, LastTransitionTime: at,
		}},
		Pending:      []v1alpha1.PendingRestart{{Kind: v1alpha1.TargetDeployment, Name: "api", Since: at, Reason: "MaintenanceWindow"}},
		LastRestarts: []v1alpha1.Restart{{Kind: v1alpha1.TargetDeployment, Name: "api", At: at, Sources: []string{"ConfigMap/shared-settings"}}},
	}
	base := p.DeepCopy()
	p.Status = want
	g.Expect(c.Status().Patch(t.Context(), p, client.MergeFrom(base))).To(Succeed())

	got := &v1alpha1.ReloadPolicy{}
	g.Expect(c.Get(t.Context(), client.ObjectKeyFromObject(p), got)).To(Succeed())
	g.Expect(equality.Semantic.DeepEqual(got.Status, want)).To(BeTrue(), "status read back differs (-want +got):\n%s", cmp.Diff(want, got.Status))
	g.Expect(got.Generation).To(Equal(gen), "a status write is no spec change")

	// Through the main resource, a status change is dropped and the spec
	// change kept.
	base = got.DeepCopy()
	got.Status.ObservedGeneration = 99
	got.Spec.DryRun = false
	g.Expect(c.Patch(t.Context(), got, client.MergeFrom(base))).To(Succeed())
	g.Expect(c.Get(t.Context(), client.ObjectKeyFromObject(p), got)).To(Succeed())
	g.Expect(got.Status.ObservedGeneration).To(Equal(gen))
	g.Expect(got.Spec.DryRun).To(BeFalse())
	g.Expect(got.Generation).To(Equal(gen + 1))
}

func manySources(n int) []v1alpha1.Source {
	s := make([]v1alpha1.Source, n)
	for i := range s {
		s[i] = v1alpha1.Source{Kind: v1alpha1.SourceConfigMap, Name: fmt.Sprintf("config-%d", i)}
	}
	return s
}
