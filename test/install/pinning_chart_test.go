package install

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// servesMutatingPolicies are the helm template arguments of an API server
// that serves MutatingAdmissionPolicy (Kubernetes 1.36 and later), as the
// test control plane does, and so ValidatingAdmissionPolicy too.
var servesMutatingPolicies = append([]string{"--api-versions", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"}, servesPolicies...)

// pinningRights are the rules pinning adds to the rules of the watched
// namespaces (ClusterRole or Roles), as rules() writes them.
var pinningRights = []string{"configmaps: create,patch", "secrets: create,patch", "apps/replicasets: get,list,watch", "apps/controllerrevisions: get,list,watch", "pods: list"}

// TestPinningChart renders the chart with and without pinning.enabled:
// only with it, on an API server that serves MutatingAdmissionPolicy, are
// the policy that pins pods (and its binding), the policy that narrows
// watcher's writes to snapshots, and the rights to create and patch
// ConfigMaps and Secrets there; watcher gets PINNING from the value
// (PINNING_POLICY and PINNING_BUDGET either way, read only with it) and,
// with it, the right to read that policy by name. The API
// server accepts every object rendered with pinning (server-side apply,
// dry run, no warning).
func TestPinningChart(t *testing.T) {
	ns := namespace(t, "pin-tpl", nil)
	policies := func(g Gomega, objs []*unstructured.Unstructured, n int) {
		g.Expect(find(objs, "MutatingAdmissionPolicy", "")).To(HaveLen(n))
		g.Expect(find(objs, "MutatingAdmissionPolicyBinding", "")).To(HaveLen(n))
		g.Expect(find(objs, "ValidatingAdmissionPolicy", "pc-watcher-snapshots")).To(HaveLen(n))
		g.Expect(find(objs, "ValidatingAdmissionPolicyBinding", "pc-watcher-snapshots")).To(HaveLen(n))
	}
	// creates is the Secret rule of the policy pc-watcher-creates.
	creates := func(g Gomega, objs []*unstructured.Unstructured) string {
		vap := find(objs, "ValidatingAdmissionPolicy", "pc-watcher-creates")
		g.Expect(vap).To(HaveLen(1))
		rules, _, _ := unstructured.NestedSlice(vap[0].Object, "spec", "validations")
		return rules[0].(map[string]any)["expression"].(string)
	}
	for _, tc := range []struct {
		name  string
		args  []string
		check func(g Gomega, objs []*unstructured.Unstructured)
	}{
		{"off by default", servesMutatingPolicies, func(g Gomega, objs []*unstructured.Unstructured) {
			policies(g, objs, 0)
			g.Expect(find(objs, "ClusterRole", "pc-watcher-pinning")).To(BeEmpty())
			g.Expect(rules(g, objs, "ClusterRole")).NotTo(ContainElement(MatchRegexp(`^(configmaps|secrets): .*(create|patch)`)),
				"no create or patch on ConfigMaps or Secrets in the namespaces watched")
			for _, kind := range []string{"ClusterRole", "Role"} {
				g.Expect(rules(g, objs, kind)).NotTo(ContainElement(ContainSubstring("controllerrevisions")))
				g.Expect(rules(g, objs, kind)).NotTo(ContainElement(ContainSubstring("admissionpolicies")))
			}
			// The Role of watcher's own namespace, as before pinning: create
			// its hash key Secret and its ConfigMaps, patch the records of
			// Job re-creations; never patch a Secret.
			g.Expect(rules(g, objs, "Role")).To(ContainElements("secrets: create", "configmaps: create", "configmaps: get,list,patch,delete"))
			g.Expect(rules(g, objs, "Role")).NotTo(ContainElement(MatchRegexp(`^secrets: .*patch`)))
			d := deployment(t, objs)
			g.Expect(envOf(d)).To(HaveKeyWithValue("PINNING", "false"))
			// The policy's name and the budget are set, as watcher's other
			// settings are, and read only with PINNING.
			g.Expect(envOf(d)).To(HaveKeyWithValue("PINNING_POLICY", "pc-watcher-pins"))
			g.Expect(envOf(d)).To(HaveKeyWithValue("PINNING_BUDGET", "64"))
			g.Expect(creates(g, objs)).NotTo(ContainSubstring("snapshot"))
		}},
		{"enabled", append([]string{"--set", "pinning.enabled=true"}, servesMutatingPolicies...), func(g Gomega, objs []*unstructured.Unstructured) {
			policies(g, objs, 1)
			g.Expect(find(objs, "MutatingAdmissionPolicy", "pc-watcher-pins")).To(HaveLen(1))
			g.Expect(find(objs, "MutatingAdmissionPolicyBinding", "pc-watcher-pins")).To(HaveLen(1))
			g.Expect(rules(g, find(objs, "ClusterRole", "pc-watcher"), "ClusterRole")).To(ContainElements(pinningRights))
			g.Expect(rules(g, find(objs, "ClusterRole", "pc-watcher-pinning"), "ClusterRole")).To(ConsistOf(
				"admissionregistration.k8s.io/mutatingadmissionpolicies/[pc-watcher-pins]: get",
				"admissionregistration.k8s.io/mutatingadmissionpolicybindings/[pc-watcher-pins]: get"))
			g.Expect(find(objs, "ClusterRoleBinding", "pc-watcher-pinning")).To(HaveLen(1))
			d := deployment(t, objs)
			g.Expect(envOf(d)).To(HaveKeyWithValue("PINNING", "true"))
			g.Expect(envOf(d)).To(HaveKeyWithValue("PINNING_POLICY", "pc-watcher-pins"))
			g.Expect(creates(g, objs)).To(ContainSubstring("'watcher.dev/snapshot': 'true'"), "the hash key rule admits a snapshot Secret")
			for _, o := range objs {
				g.Expect(dryRunApply(t, o)).To(BeEmpty(), "%s %s", o.GetKind(), o.GetName())
			}
		}},
		{"enabled, namespaced, another policy name", append([]string{"--set", "pinning.enabled=true,pinning.policyName=pins,rbac.scope=namespaced,discovery.namespaces={team-a,team-b}"},
			servesMutatingPolicies...), func(g Gomega, objs []*unstructured.Unstructured) {
			policies(g, objs, 1)
			g.Expect(find(objs, "MutatingAdmissionPolicy", "pins")).To(HaveLen(1))
			g.Expect(find(objs, "MutatingAdmissionPolicyBinding", "pins")).To(HaveLen(1))
			// The rights follow the watch: in each namespace watched.
			for _, r := range find(objs, "Role", "pc-watcher") {
				g.Expect(rules(g, []*unstructured.Unstructured{r}, "Role")).To(ContainElements(pinningRights), r.GetNamespace())
			}
			g.Expect(rules(g, find(objs, "ClusterRole", "pc-watcher-pinning"), "ClusterRole")).To(ConsistOf(
				"admissionregistration.k8s.io/mutatingadmissionpolicies/[pins]: get",
				"admissionregistration.k8s.io/mutatingadmissionpolicybindings/[pins]: get"))
			g.Expect(envOf(deployment(t, objs))).To(HaveKeyWithValue("PINNING_POLICY", "pins"))
		}},
		{"enabled where MutatingAdmissionPolicy is not served", append([]string{"--set", "pinning.enabled=true"}, servesPolicies...), func(g Gomega, objs []*unstructured.Unstructured) {
			// Nothing to pin with: no policy, no new right but reading the
			// policy, so that watcher finds it missing and says so.
			policies(g, objs, 0)
			g.Expect(rules(g, objs, "ClusterRole")).NotTo(ContainElement(MatchRegexp(`^(configmaps|secrets): .*(create|patch)`)))
			g.Expect(find(objs, "ClusterRole", "pc-watcher-pinning")).To(HaveLen(1))
			g.Expect(envOf(deployment(t, objs))).To(HaveKeyWithValue("PINNING", "true"))
			g.Expect(creates(g, objs)).NotTo(ContainSubstring("snapshot"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(NewWithT(t), render(t, "pc", ns, tc.args...))
		})
	}

	// The notes say where pinning is not installed (helm's client-side dry
	// run knows of no MutatingAdmissionPolicy).
	g := NewWithT(t)
	out := mustHelm(t, "install", "pc", chart, "-n", ns, "--dry-run=client", "--set", "pinning.enabled=true")
	g.Expect(strings.Join(strings.Fields(out), " ")).To(ContainSubstring("does not serve MutatingAdmissionPolicy"))
}
