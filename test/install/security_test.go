package install

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// grant is one right of a rendered rule or of a row of docs/security.md's
// table: one API group and one resource, with the names it is limited to,
// its verbs and where it applies.
type grant struct {
	group, resource string
	// names are the resourceNames, sorted, joined with ","; "" for none;
	// anyNames for a row that names them in prose (set by a value).
	names string
	// verbs are sorted, joined with ",".
	verbs string
	// scope is "cluster", "watched namespaces", "own namespace" or "alert
	// Secret's namespace".
	scope string
}

// anyNames stands, in a row of the page, for resource names that a value
// sets: it matches any non-empty list.
const anyNames = "(named by a value)"

func (g grant) String() string {
	group := g.group
	if group == "" {
		group = "core"
	}
	names := g.names
	if names == "" {
		names = "all"
	}
	return fmt.Sprintf("%s %s (names: %s) [%s] in %s", group, g.resource, names, g.verbs, g.scope)
}

// row is one row of the page's rules table, expanded into grants.
type row struct {
	line    int
	text    string
	grants  []grant
	granted string // the "Granted" cell
}

// matches tells whether the page's grant p describes the rendered grant r.
func (p grant) matches(r grant) bool {
	names := p.names == r.names || p.names == anyNames && r.names != ""
	return p.group == r.group && p.resource == r.resource && names && p.verbs == r.verbs && p.scope == r.scope
}

// securityValueSets are the value sets the page must describe: the
// defaults, and together every value that adds or removes a right. The
// release is "watcher" in the namespace "watcher", as the page assumes.
var securityValueSets = []struct {
	name string
	args []string
	// watched are the namespaces of discovery.namespaces; alertNS the
	// namespace of alerts.webhookURLSecret. Neither is "watcher".
	watched []string
	alertNS string
}{
	{name: "default"},
	{name: "evict and csi", args: []string{"--set", "restart.strategy=evict", "--set", "csi.enabled=true", "--set", "discovery.namespaceSelector=team=a"}},
	{name: "pod eviction", args: []string{"--set", "rbac.podEviction=true"}},
	{name: "refresh siblings", args: []string{"--set", "rbac.refreshSiblings=true"}},
	{name: "pinning", args: []string{"--set", "pinning.enabled=true", "--api-versions", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"}},
	{name: "jobs ignored, trigger", args: []string{"--set", "discovery.ignoreWorkloadKinds={Job}", "--set", "restart.cronjobTrigger=true"}},
	{name: "jobs ignored", args: []string{"--set", "discovery.ignoreWorkloadKinds={Job}"}},
	{name: "optional off, no lock", args: []string{"--set", "rbac.argoRollouts=false", "--set", "rbac.sealedSecrets=false", "--set", "rbac.producers=false",
		"--set", "rbac.reloadPolicies=false", "--set", "rbac.settingsReaders=null", "--set", "lock.mode=none"}},
	{
		name: "namespaced",
		args: []string{"--set", "rbac.scope=namespaced", "--set", "discovery.namespaces={apps-a,apps-b}",
			"--set", "alerts.webhookURLSecret=alerts/alert-url:url", "--set", "discovery.namespaceSelector=team=a",
			"--set", "restart.strategy=evict", "--set", "csi.enabled=true"},
		watched: []string{"apps-a", "apps-b"},
		alertNS: "alerts",
	},
}

// TestSecurityPage: the rules table of docs/security.md is the RBAC the
// chart grants watcher's ServiceAccount. For each value set, every rule of
// every ClusterRole and Role bound to it (helm template, the real CLI) is a
// row of the table; every row is rendered by one of the value sets; and the
// rows marked "default" are exactly what the chart's defaults grant.
func TestSecurityPage(t *testing.T) {
	rows := securityRows(t)
	used := make([]bool, len(rows))
	for _, vs := range securityValueSets {
		t.Run(vs.name, func(t *testing.T) {
			objs := render(t, "watcher", "watcher", vs.args...)
			rendered := boundGrants(t, objs, "watcher", "watcher", vs.watched, vs.alertNS)
			if len(rendered) < 5 {
				t.Fatalf("only %d grants rendered: %v", len(rendered), rendered)
			}
			for _, g := range rendered {
				found := false
				for i, r := range rows {
					for _, p := range r.grants {
						if p.matches(g) {
							found, used[i] = true, true
						}
					}
				}
				if !found {
					t.Errorf("the chart grants %s; docs/security.md's table has no row for it", g)
				}
			}
			if vs.name != "default" {
				return
			}
			// The defaults: each row marked default is rendered, whole
			// (in the cluster scope, the default rbac.scope).
			for _, r := range rows {
				if !strings.HasPrefix(r.granted, "default") {
					continue
				}
				for _, p := range r.grants {
					if p.scope != "watched namespaces" && !slices.ContainsFunc(rendered, p.matches) {
						t.Errorf("docs/security.md:%d says the defaults grant %s; they do not", r.line, p)
					}
				}
			}
			for _, g := range rendered {
				if !slices.ContainsFunc(rows, func(r row) bool {
					return strings.HasPrefix(r.granted, "default") && slices.ContainsFunc(r.grants, func(p grant) bool { return p.matches(g) })
				}) {
					t.Errorf("the defaults grant %s; docs/security.md's row for it is not marked default", g)
				}
			}
		})
	}
	if t.Failed() {
		return
	}
	for i, r := range rows {
		if !used[i] {
			t.Errorf("docs/security.md:%d: no value set renders this row: %s", r.line, r.text)
		}
	}
}

// boundGrants are the grants of the ClusterRoles and Roles of objs that a
// binding of objs gives the ServiceAccount ns/sa (by name, or through a
// group every ServiceAccount is in), with the scope of each.
func boundGrants(t *testing.T, objs []*unstructured.Unstructured, ns, sa string, watched []string, alertNS string) []grant {
	t.Helper()
	roles := map[string]rbacv1.ClusterRole{} // "Kind/namespace/name"
	var bindings []rbacv1.RoleBinding        // ClusterRoleBindings too, with no namespace
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole", "Role":
			var r rbacv1.ClusterRole
			convert(t, o, &r)
			roles[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = r
		case "ClusterRoleBinding", "RoleBinding":
			var b rbacv1.RoleBinding
			convert(t, o, &b)
			bindings = append(bindings, b)
		}
	}
	var out []grant
	for _, b := range bindings {
		if !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool { return subjectHolds(s, ns, sa) }) {
			continue
		}
		roleNS := b.Namespace
		if b.RoleRef.Kind == "ClusterRole" {
			roleNS = ""
		}
		role, ok := roles[b.RoleRef.Kind+"/"+roleNS+"/"+b.RoleRef.Name]
		if !ok {
			t.Fatalf("binding %s/%s names %s %s, which the chart does not render", b.Namespace, b.Name, b.RoleRef.Kind, b.RoleRef.Name)
		}
		var scope string
		switch {
		case b.Namespace == "":
			scope = "cluster"
		case b.Namespace == ns:
			scope = "own namespace"
		case slices.Contains(watched, b.Namespace):
			scope = "watched namespaces"
		case b.Namespace == alertNS:
			scope = "alert Secret's namespace"
		default:
			t.Fatalf("binding %s/%s: a namespace the test does not expect", b.Namespace, b.Name)
		}
		for _, rule := range role.Rules {
			names := slices.Sorted(slices.Values(rule.ResourceNames))
			verbs := slices.Sorted(slices.Values(rule.Verbs))
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					gr := grant{group: g, resource: res, names: strings.Join(names, ","), verbs: strings.Join(verbs, ","), scope: scope}
					if !slices.Contains(out, gr) { // one Role per watched namespace
						out = append(out, gr)
					}
				}
			}
		}
	}
	return out
}

// subjectHolds tells whether the subject s takes in the ServiceAccount
// ns/sa: the account itself, or a group all ServiceAccounts (of ns) or all
// authenticated users are in.
func subjectHolds(s rbacv1.Subject, ns, sa string) bool {
	switch s.Kind {
	case "ServiceAccount":
		return s.Name == sa && s.Namespace == ns
	case "Group":
		return slices.Contains([]string{"system:authenticated", "system:serviceaccounts", "system:serviceaccounts:" + ns}, s.Name)
	}
	return false
}

// convert turns o into the typed obj.
func convert(t *testing.T, o *unstructured.Unstructured, obj any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, obj); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
}

var codeSpan = regexp.MustCompile("`([^`]*)`")

// securityRows reads the table of the section "## Rules" of
// docs/security.md. Its columns: API group ("core" or `group`, several
// separated by commas), Resources (`name`, several), Names ("all", `name`s,
// or prose: names a value sets), Verbs, Scope (several joined by " or "),
// Granted, Why.
func securityRows(t *testing.T) []row {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	start := slices.Index(lines, "## Rules")
	if start < 0 {
		t.Fatal("docs/security.md has no section ## Rules")
	}
	var rows []row
	header := false
	for i := start + 1; i < len(lines) && !strings.HasPrefix(lines[i], "## "); i++ {
		line := lines[i]
		if !strings.HasPrefix(line, "|") {
			if header {
				break // the table has ended
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if !header {
			want := []string{"API group", "Resources", "Names", "Verbs", "Scope", "Granted", "Why"}
			if !slices.Equal(cells, want) {
				t.Fatalf("docs/security.md:%d: the table's columns are %q, want %q", i+1, cells, want)
			}
			header = true
			continue
		}
		if strings.HasPrefix(cells[0], "---") {
			continue
		}
		if len(cells) != 7 {
			t.Fatalf("docs/security.md:%d: %d cells, want 7: %s", i+1, len(cells), line)
		}
		rows = append(rows, parseRow(t, i+1, line, cells))
	}
	if len(rows) < 10 {
		t.Fatalf("docs/security.md's rules table has %d rows: is it parsed?", len(rows))
	}
	return rows
}

// parseRow expands one row of the table into its grants.
func parseRow(t *testing.T, line int, text string, cells []string) row {
	t.Helper()
	list := func(cell string) []string {
		var out []string
		for _, s := range strings.Split(cell, ",") {
			s = strings.Trim(strings.TrimSpace(s), "`")
			if s == "core" {
				s = ""
			}
			out = append(out, s)
		}
		return out
	}
	names := ""
	switch cell := cells[2]; {
	case cell == "all":
	case strings.TrimSpace(strings.ReplaceAll(codeSpan.ReplaceAllString(cell, ""), ",", "")) == "":
		n := list(cell)
		slices.Sort(n)
		names = strings.Join(n, ",")
	default:
		names = anyNames
	}
	verbs := list(cells[3])
	slices.Sort(verbs)
	r := row{line: line, text: text, granted: cells[5]}
	for _, scope := range strings.Split(cells[4], " or ") {
		for _, g := range list(cells[0]) {
			for _, res := range list(cells[1]) {
				if res == "" {
					t.Fatalf("docs/security.md:%d: an empty resource", line)
				}
				r.grants = append(r.grants, grant{group: g, resource: res, names: names, verbs: strings.Join(verbs, ","), scope: scope})
			}
		}
	}
	return r
}
