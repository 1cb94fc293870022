// Package reloader holds the RBAC that watcher needs beyond the rights of
// Stakater Reloader's chart to run in Reloader's own Deployment (rbac.yaml
// for Reloader's global mode, rbac-namespaced.yaml for watchGlobally:
// false), and the admission policy that narrows its rights in Reloader's
// namespace to watcher's own objects (admissionpolicy.yaml, applied with
// either), so that `watcher migrate` prints exactly the files that
// test/install applies.
package reloader

import (
	_ "embed"
	"regexp"
	"strings"
)

var (
	//go:embed rbac.yaml
	global string
	//go:embed rbac-namespaced.yaml
	namespaced string
	//go:embed admissionpolicy.yaml
	policy string
)

// As written, the files are for release "reloader" in namespace
// "reloader": ServiceAccount reloader-reloader. Each edit is one of the
// sed expressions of Sed, in the same order, on the YAML alone (the
// comments that show the sed expressions are left as they are).
var (
	namespaceLine      = regexp.MustCompile(`(?m)^(\s*namespace: )reloader$`)
	serviceAccountLine = regexp.MustCompile(`(?m)^(\s*name: )reloader-reloader$`)
	policyName         = regexp.MustCompile(`(?m)^(\s*(?:name|policyName): watcher-image-swap-)reloader$`)
	userName           = regexp.MustCompile(`(?m)^(\s*expression: .*:)reloader:reloader-reloader'`)
	namespaceLiteral   = regexp.MustCompile(`(?m)^(\s*\(request\.namespace == ')reloader'`)
)

// Files are the files of the RBAC for Reloader's mode, in the order to
// apply (the admission policy last: it names the ServiceAccount, not the
// Role).
func Files(namespacedMode bool) []string {
	if namespacedMode {
		return []string{"rbac-namespaced.yaml", "admissionpolicy.yaml"}
	}
	return []string{"rbac.yaml", "admissionpolicy.yaml"}
}

// Sed returns the sed expressions that fill in the files (Files) for
// namespace ns and ServiceAccount sa, as RBAC does, quoted for a POSIX
// shell.
func Sed(ns, sa string) string {
	return strings.Join([]string{
		"-e 's/namespace: reloader$/namespace: " + ns + "/'",
		"-e 's/name: reloader-reloader$/name: " + sa + "/'",
		"-e 's/image-swap-reloader$/image-swap-" + ns + "/'",
		"-e 's/:reloader:reloader-reloader/:" + ns + ":" + sa + "/'",
		`-e "s/namespace == 'reloader'/namespace == '` + ns + `'/"`,
	}, " ")
}

// RBAC returns the RBAC for Reloader's Deployment in namespace ns, running
// as ServiceAccount sa: rbac-namespaced.yaml if Reloader watches its own
// namespace alone (its chart's watchGlobally: false, KUBERNETES_NAMESPACE
// in the Deployment's env), else rbac.yaml; then admissionpolicy.yaml,
// which matches the user system:serviceaccount:<ns>:<sa>.
func RBAC(ns, sa string, namespacedMode bool) string {
	s := global
	if namespacedMode {
		s = namespaced
	}
	s += policy
	s = namespaceLine.ReplaceAllString(s, "${1}"+ns)
	s = serviceAccountLine.ReplaceAllString(s, "${1}"+sa)
	s = policyName.ReplaceAllString(s, "${1}"+ns)
	s = userName.ReplaceAllString(s, "${1}"+ns+":"+sa+"'")
	return namespaceLiteral.ReplaceAllString(s, "${1}"+ns+"'")
}
