package explain

import (
	"fmt"
	"io"
	"strings"
)

// WriteDOT writes the graph in Graphviz's DOT language: a box per
// workload, an ellipse per ConfigMap, a note per Secret, and an edge from
// each workload to each object it uses, labelled with the keys it reads
// ("*" for every key) and how. An edge that does not count (a rule drops
// or ignores it) is dashed; an object absent or not watched is grey.
func (g Graph) WriteDOT(w io.Writer) error {
	var b strings.Builder
	b.WriteString("digraph watcher {\n  rankdir=LR;\n  node [fontname=\"Helvetica\", fontsize=10];\n  edge [fontname=\"Helvetica\", fontsize=9];\n")
	for _, gw := range g.Workloads {
		attrs := "shape=box"
		if !gw.Watched {
			attrs += ", style=dashed"
		}
		fmt.Fprintf(&b, "  %s [%s, label=%s];\n", quote(id(gw.Kind, gw.Namespace, gw.Name)), attrs, quote(gw.Kind+"\n"+gw.Namespace+"/"+gw.Name))
	}
	for _, c := range g.Configs {
		attrs := "shape=ellipse"
		if c.Kind == "Secret" {
			attrs = "shape=note"
		}
		if c.State != StatePresent {
			attrs += ", style=dashed, color=grey, fontcolor=grey"
		}
		fmt.Fprintf(&b, "  %s [%s, label=%s];\n", quote(id(c.Kind, c.Namespace, c.Name)), attrs, quote(c.Kind+"\n"+c.Namespace+"/"+c.Name))
	}
	for _, gw := range g.Workloads {
		for _, u := range gw.Uses {
			label := "*"
			if !u.AllKeys {
				label = strings.Join(u.Keys, ",")
			}
			var via []string
			for _, p := range u.Paths {
				via = append(via, p.Via)
			}
			label += " (" + strings.Join(compact(via), ",") + ")"
			attrs := ""
			if u.Verdict != "count" {
				attrs = ", style=dashed"
				label += "\n" + u.Verdict + ": " + u.Rule
			}
			fmt.Fprintf(&b, "  %s -> %s [label=%s%s];\n", quote(id(gw.Kind, gw.Namespace, gw.Name)), quote(id(u.Kind, gw.Namespace, u.Name)), quote(label), attrs)
		}
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// quote writes s as a DOT quoted string: backslashes and quotes escaped,
// line breaks as \n.
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", "")
	return `"` + r.Replace(s) + `"`
}

// compact drops repeated neighbours of ss.
func compact(ss []string) []string {
	var out []string
	for _, s := range ss {
		if len(out) == 0 || out[len(out)-1] != s {
			out = append(out, s)
		}
	}
	return out
}
