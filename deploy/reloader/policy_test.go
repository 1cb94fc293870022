package reloader_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/watcher-dev/watcher/deploy/reloader"
	"github.com/watcher-dev/watcher/internal/restart"
)

// rendered is the RBAC of the image swap, decoded.
type rendered struct {
	roles    []rbacv1.Role
	policy   *admissionv1.ValidatingAdmissionPolicy
	binding  *admissionv1.ValidatingAdmissionPolicyBinding
	policies int
}

func decodeRBAC(t *testing.T, out string) rendered {
	t.Helper()
	var r rendered
	for _, doc := range strings.Split(out, "\n---\n") {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("decode: %v\n%s", err, doc)
		}
		var err error
		switch meta.Kind {
		case "Role":
			var role rbacv1.Role
			err = yaml.UnmarshalStrict([]byte(doc), &role)
			r.roles = append(r.roles, role)
		case "ValidatingAdmissionPolicy":
			r.policy = &admissionv1.ValidatingAdmissionPolicy{}
			err = yaml.UnmarshalStrict([]byte(doc), r.policy)
			r.policies++
		case "ValidatingAdmissionPolicyBinding":
			r.binding = &admissionv1.ValidatingAdmissionPolicyBinding{}
			err = yaml.UnmarshalStrict([]byte(doc), r.binding)
		}
		if err != nil {
			t.Fatalf("decode %s: %v", meta.Kind, err)
		}
	}
	return r
}

// operations are the admission operations of the RBAC verbs that write.
var operations = map[string]admissionv1.OperationType{
	"create": admissionv1.Create, "update": admissionv1.Update, "patch": admissionv1.Update, "delete": admissionv1.Delete,
}

// TestAdmissionPolicy: the image swap's RBAC, in either mode, comes with
// one admission policy and its binding, for Reloader's namespace and
// ServiceAccount alone, and the policy covers every write the Roles in
// Reloader's namespace grant without naming the object (Events aside):
// create of Secrets, ConfigMaps and Leases, update, patch and delete of
// ConfigMaps. Its rules admit the names watcher uses and nothing
// else, in Reloader's namespace.
func TestAdmissionPolicy(t *testing.T) {
	for _, namespaced := range []bool{false, true} {
		r := decodeRBAC(t, reloader.RBAC("kube-system", "rl", namespaced))
		if r.policies != 1 || r.policy == nil || r.binding == nil {
			t.Fatalf("namespaced=%v: %d policies, binding %v: want one of each", namespaced, r.policies, r.binding != nil)
		}
		p, b := r.policy, r.binding
		if p.Name != "watcher-image-swap-kube-system" || b.Name != p.Name || b.Spec.PolicyName != p.Name {
			t.Errorf("policy %q, binding %q for %q: want both watcher-image-swap-kube-system", p.Name, b.Name, b.Spec.PolicyName)
		}
		if !slices.Equal(b.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny}) || b.Spec.MatchResources != nil || b.Spec.ParamRef != nil {
			t.Errorf("binding %+v: want Deny, everywhere", b.Spec)
		}
		if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionv1.Fail {
			t.Errorf("failurePolicy %v, want Fail", p.Spec.FailurePolicy)
		}
		want := []admissionv1.MatchCondition{{Name: "watcher", Expression: "request.userInfo.username == 'system:serviceaccount:kube-system:rl'"}}
		if !slices.Equal(p.Spec.MatchConditions, want) {
			t.Errorf("matchConditions %+v, want %+v", p.Spec.MatchConditions, want)
		}

		// Every unnamed write of a Role in Reloader's namespace is matched.
		covered := func(group, resource string, op admissionv1.OperationType) bool {
			for _, rule := range p.Spec.MatchConstraints.ResourceRules {
				if slices.Contains(rule.APIGroups, group) && slices.Contains(rule.Resources, resource) && slices.Contains(rule.Operations, op) {
					return true
				}
			}
			return false
		}
		var matched []string
		for _, role := range r.roles {
			if role.Namespace != "kube-system" {
				t.Errorf("Role %s in %q", role.Name, role.Namespace)
			}
			for _, rule := range role.Rules {
				if len(rule.ResourceNames) > 0 {
					continue
				}
				for _, g := range rule.APIGroups {
					for _, res := range rule.Resources {
						for _, v := range rule.Verbs {
							op, writes := operations[v]
							if !writes || res == "events" || !slices.Contains([]string{"", "coordination.k8s.io"}, g) {
								continue
							}
							if !covered(g, res, op) {
								t.Errorf("namespaced=%v: %s %q %s granted by Role %s, not matched by the policy", namespaced, v, g, res, role.Name)
							}
							matched = append(matched, res+" "+v)
						}
					}
				}
			}
		}
		for _, w := range []string{"secrets create", "configmaps create", "configmaps patch", "configmaps delete", "leases create"} {
			if !slices.Contains(matched, w) {
				t.Errorf("namespaced=%v: no unnamed %s in the Roles (%v): the policy's rules are no longer those of the Roles", namespaced, w, matched)
			}
		}
		if !covered("", "configmaps", admissionv1.Update) {
			t.Error("configmaps update (watcher-settings) not matched")
		}

		// Each rule names Reloader's namespace; none is left as written.
		var all strings.Builder
		for _, v := range p.Spec.Validations {
			all.WriteString(v.Expression + "\n")
			if !strings.Contains(v.Expression, "request.namespace == 'kube-system'") {
				t.Errorf("validation %q does not hold to kube-system", v.Expression)
			}
		}
		for _, name := range []string{"'watcher-hash-key'", "object.type == 'Opaque'", "'watcher-settings'", "'watcher'"} {
			if !strings.Contains(all.String(), name) {
				t.Errorf("no %s in the validations", name)
			}
		}
		if strings.Contains(all.String(), "reloader") {
			t.Errorf("the namespace as written is left in:\n%s", all.String())
		}
	}
}

// TestAdmissionPolicyRecordNames: the ConfigMaps the policy admits besides
// watcher-settings are named as restart.RecordName names the records of
// Job re-creations (CEL's matches is RE2, as Go's regexp).
func TestAdmissionPolicyRecordNames(t *testing.T) {
	r := decodeRBAC(t, reloader.RBAC("reloader", "reloader-reloader", false))
	found := regexp.MustCompile(`variables\.name\.matches\('([^']+)'\)`).FindStringSubmatch(validation(t, r.policy, "configmaps"))
	if found == nil {
		t.Fatal("no name pattern in the ConfigMaps' rule")
	}
	re := regexp.MustCompile(found[1])
	for _, job := range [][2]string{{"reloader", "migrate"}, {"shop", strings.Repeat("j", 63)}} {
		if name := restart.RecordName(job[0], job[1]); !re.MatchString(name) {
			t.Errorf("record %s of Job %s/%s not admitted by %s", name, job[0], job[1], re)
		}
	}
	for _, name := range []string{"coredns", "aws-auth", "watcher-recreate-", "watcher-recreate-0123456789abcdef012", "x-watcher-recreate-0123456789abcdef0123"} {
		if re.MatchString(name) {
			t.Errorf("%s admitted by %s", name, re)
		}
	}
}

// TestAdmissionPolicyAsChart: the rule on Secrets is the expression of
// watcher's chart (templates/admissionpolicy.yaml, without pinning: the
// image swap does not pin), filled in for Reloader's namespace and the hash
// key Secret's name.
func TestAdmissionPolicyAsChart(t *testing.T) {
	chart, err := os.ReadFile("../helm/watcher/templates/admissionpolicy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(chart), "request.resource.resource != 'secrets' ||")
	end := strings.Index(string(chart), "object.type == 'Opaque')")
	if start < 0 || end < start {
		t.Fatal("the chart's rule on Secrets not found")
	}
	want := string(chart[start : end+len("object.type == 'Opaque')")])
	want = strings.NewReplacer(`{{ .Release.Namespace | squote }}`, `'tools'`, `{{ include "watcher.hashKeySecret" . | squote }}`, `'watcher-hash-key'`).Replace(want)
	want = strings.Join(strings.Fields(want), " ")
	r := decodeRBAC(t, reloader.RBAC("tools", "rl", true))
	if got := strings.Join(strings.Fields(validation(t, r.policy, "secrets")), " "); got != want {
		t.Errorf("rule on Secrets:\n%s\nwant the chart's:\n%s", got, want)
	}
}

// validation returns the expression of p's rule on resource.
func validation(t *testing.T, p *admissionv1.ValidatingAdmissionPolicy, resource string) string {
	t.Helper()
	for _, v := range p.Spec.Validations {
		if strings.HasPrefix(v.Expression, "request.resource.resource != '"+resource+"'") {
			return v.Expression
		}
	}
	t.Fatalf("no rule on %s", resource)
	return ""
}

// TestSed: the sed expressions printed for the files (Sed, Files) make the
// YAML that RBAC gives, comments aside.
func TestSed(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no shell")
	}
	if _, err := exec.LookPath("sed"); err != nil {
		t.Skip("no sed")
	}
	yamlOnly := func(s string) string {
		var out []string
		for _, l := range strings.Split(s, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "#") {
				out = append(out, l)
			}
		}
		return strings.Join(out, "\n")
	}
	for _, namespaced := range []bool{false, true} {
		cmd := exec.Command("sh", "-c", "sed "+reloader.Sed("kube-system", "rl")+" "+strings.Join(reloader.Files(namespaced), " "))
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		if got, want := yamlOnly(string(out)), yamlOnly(reloader.RBAC("kube-system", "rl", namespaced)); got != want {
			t.Errorf("namespaced=%v: sed gives\n%s\nwant\n%s", namespaced, got, want)
		}
	}
}
