package migrate

import (
	"fmt"
	"slices"
	"strings"
)

// Neighbours are the names of the ServiceAccounts and ConfigMaps of
// Reloader's namespace, where the image swap grants watcher's rights on
// its own state (create of Secrets, ConfigMaps and Leases; patch and
// delete of ConfigMaps).
type Neighbours struct {
	ServiceAccounts []string
	ConfigMaps      []string
	// Unread says why they could not be listed.
	Unread string
}

// kubernetesOwn are the objects every namespace holds, and watcher's own
// state, which share nothing with another tenant.
var kubernetesOwn = map[string][]string{
	"ServiceAccount": {"default"},
	"ConfigMap":      {"kube-root-ca.crt", "watcher-settings"},
}

// sharedWarning returns the warning, one line per element, that the image
// swap puts watcher's rights in a namespace shared with others; none when
// n is nil (not read) or Reloader's namespace holds only Reloader's
// ServiceAccount and what every namespace holds.
//
//	neighbours                                     warning
//	nil (not read)                                 none
//	could not be listed                            yes: check by hand
//	default, Reloader's SA, kube-root-ca.crt,      none
//	  watcher-settings, watcher-recreate-*
//	any other ServiceAccount or ConfigMap          yes: lists them
//	Reloader runs as the default ServiceAccount    yes: every pod of the namespace without one of its own
func sharedWarning(r Reloader, n *Neighbours) []string {
	if n == nil {
		return nil
	}
	tail := []string{
		"The image swap grants watcher's rights there to Reloader's ServiceAccount " + r.ServiceAccount + ": create",
		"Secrets, ConfigMaps and Leases, patch and delete ConfigMaps. The admission policy printed",
		"with the RBAC narrows them to watcher's own objects, but only on Kubernetes 1.30 or later",
		"and while it stays applied; and whoever holds that token reads the Secrets Reloader reads.",
		"Prefer path 1 above: watcher's chart, in a namespace of its own.",
	}
	if n.Unread != "" {
		return append([]string{
			fmt.Sprintf("WARNING: the ServiceAccounts and ConfigMaps of Reloader's namespace %s could not be listed", r.Namespace),
			fmt.Sprintf("(%s): check that it holds nothing but Reloader before the image swap.", n.Unread),
		}, tail...)
	}
	sas := others(n.ServiceAccounts, append([]string{r.ServiceAccount}, kubernetesOwn["ServiceAccount"]...))
	cms := slices.DeleteFunc(others(n.ConfigMaps, kubernetesOwn["ConfigMap"]), func(name string) bool {
		return strings.HasPrefix(name, "watcher-recreate-")
	})
	var head []string
	if len(sas) > 0 || len(cms) > 0 {
		head = append(head,
			fmt.Sprintf("WARNING: Reloader's namespace %s is shared: it holds %s besides Reloader's:", r.Namespace, sharedCounts(len(sas), len(cms))))
		if len(sas) > 0 {
			head = append(head, "  ServiceAccounts: "+shortList(sas))
		}
		if len(cms) > 0 {
			head = append(head, "  ConfigMaps: "+shortList(cms))
		}
	}
	if r.ServiceAccount == "default" {
		if head == nil {
			head = append(head, "WARNING: Reloader runs as the default ServiceAccount of its namespace "+r.Namespace+":")
		}
		head = append(head, "  every pod of "+r.Namespace+" without a ServiceAccount of its own would hold watcher's rights.")
	}
	if head == nil {
		return nil
	}
	return append(head, tail...)
}

// others returns the names not in own, sorted.
func others(names, own []string) []string {
	var out []string
	for _, n := range names {
		if !slices.Contains(own, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func sharedCounts(sas, cms int) string {
	var parts []string
	if sas > 0 {
		parts = append(parts, plural(sas, "other ServiceAccount"))
	}
	if cms > 0 {
		parts = append(parts, plural(cms, "other ConfigMap"))
	}
	return strings.Join(parts, " and ")
}

// shortList joins the first names, and counts the rest.
func shortList(names []string) string {
	const shown = 8
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:shown], ", "), len(names)-shown)
}
