package migrate

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// WriteText prints p for people: the Reloader, what to apply by either
// path, the notes, the counts and the differences.
func (p Plan) WriteText(w io.Writer) error {
	r := p.Reloader
	fmt.Fprintf(w, "Reloader %s/%s (container %s, image %s, %s, ServiceAccount %s)\n", r.Namespace, r.Name, r.Container, r.Image, plural(int(r.Replicas), "replica"), r.ServiceAccount)
	if len(r.Args) > 0 {
		fmt.Fprintf(w, "Arguments: %s\n", strings.Join(ShownArgs(r.Args), " "))
	} else {
		fmt.Fprintln(w, "Arguments: none")
	}
	for _, name := range sortedKeys(r.SecretEnv) {
		ref := r.SecretEnv[name]
		fmt.Fprintf(w, "Variable %s from %s %s key %s (not read)\n", name, ref.Kind, ref.Name, ref.Key)
	}

	fmt.Fprintln(w, "\nTo apply, either:")
	fmt.Fprintln(w, "\n1. Install watcher beside Reloader in dry-run (it restarts nothing), compare, then cut over:")
	fmt.Fprintf(w, "\n%s\n", p.Helm.Install)
	for _, v := range p.Helm.Values {
		fmt.Fprintf(w, "     # %s: %s\n", v.Path, v.Why)
	}
	fmt.Fprintf(w, "\n   after a while (an hour of changes, say): %s\n", p.Helm.Compare)
	fmt.Fprintf(w, "   then stop Reloader:                       %s\n", p.Helm.Scale)
	if p.Helm.Upgrade != "" {
		fmt.Fprintf(w, "   and let watcher restart:                  %s\n", p.Helm.Upgrade)
	}
	fmt.Fprintln(w, "\n2. Or run watcher in Reloader's own Deployment (its arguments, environment and probes unchanged),")
	fmt.Fprintf(w, "   after adding %s:\n\n", p.ImageSwap.RBAC)
	for _, c := range p.ImageSwap.Commands {
		fmt.Fprintf(w, "%s\n", c)
	}
	if len(p.ImageSwap.Warning) > 0 {
		fmt.Fprintln(w)
		for _, l := range p.ImageSwap.Warning {
			fmt.Fprintf(w, "   %s\n", l)
		}
	}

	if len(p.Notes) > 0 {
		fmt.Fprintln(w, "\nHow watcher reads Reloader's settings:")
		for _, n := range p.Notes {
			fmt.Fprintf(w, "  - %s\n", n)
		}
	}
	if p.Counts != nil {
		c := p.Counts
		fmt.Fprintf(w, "\nWorkloads: %d; %d opt in by Reloader's annotations; restarted on a change: %d with Reloader's arguments (%s), %d with watcher's own values\n",
			c.Workloads, c.OptIn, c.WithReloaderArgs, byKind(c.ByKind), c.WithOwnValues)
	} else {
		fmt.Fprintf(w, "\nWorkloads: not listed: %s\n", p.Unread)
	}
	fmt.Fprintln(w, "\nDifferences (! changes which workloads restart, or when):")
	if len(p.Differences) == 0 {
		fmt.Fprintln(w, "  none")
	}
	for _, d := range p.Differences {
		mark := " "
		if d.Restarts {
			mark = "!"
		}
		fmt.Fprintf(w, "%s [%s] %s\n", mark, d.Topic, d.Text)
		if d.Count > 0 {
			more := ""
			if d.Count > len(d.Workloads) {
				more = fmt.Sprintf(" and %d more", d.Count-len(d.Workloads))
			}
			fmt.Fprintf(w, "    %d: %s%s\n", d.Count, strings.Join(d.Workloads, ", "), more)
		}
	}
	return nil
}

func byKind(n map[string]int) string {
	if len(n) == 0 {
		return "none"
	}
	out := make([]string, 0, len(n))
	for _, k := range sortedKeys(n) {
		out = append(out, fmt.Sprintf("%d %s", n[k], k))
	}
	return strings.Join(out, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
