// Package reloader holds the RBAC that watcher needs beyond the rights of
// Stakater Reloader's chart to run in Reloader's own Deployment (rbac.yaml
// for Reloader's global mode, rbac-namespaced.yaml for watchGlobally:
// false), so that `watcher migrate` prints exactly the files that
// test/install applies.
package reloader

import (
	_ "embed"
	"regexp"
)

var (
	//go:embed rbac.yaml
	global string
	//go:embed rbac-namespaced.yaml
	namespaced string
)

// As written, the files are for release "reloader" in namespace
// "reloader": ServiceAccount reloader-reloader.
var (
	namespaceLine      = regexp.MustCompile(`(?m)^(\s*namespace: )reloader$`)
	serviceAccountLine = regexp.MustCompile(`(?m)^(\s*name: )reloader-reloader$`)
)

// RBAC returns the RBAC for Reloader's Deployment in namespace ns, running
// as ServiceAccount sa: rbac-namespaced.yaml if Reloader watches its own
// namespace alone (its chart's watchGlobally: false, KUBERNETES_NAMESPACE
// in the Deployment's env), else rbac.yaml.
func RBAC(ns, sa string, namespacedMode bool) string {
	s := global
	if namespacedMode {
		s = namespaced
	}
	s = namespaceLine.ReplaceAllString(s, "${1}"+ns)
	return serviceAccountLine.ReplaceAllString(s, "${1}"+sa)
}
