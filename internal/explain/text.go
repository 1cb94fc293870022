package explain

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/watcher-dev/watcher/internal/cause"
)

// WriteJSON writes v (a report or a Graph) as indented JSON.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WriteText writes the report for people.
func (r WorkloadReport) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%s %s/%s\n", r.Kind, r.Namespace, r.Name)
	fmt.Fprintf(tw, "Status:\t%s\n", r.Status)
	fmt.Fprintf(tw, "Watched:\t%s\n", yesNo(r.Watched, r.Excluded))
	fmt.Fprintf(tw, "Record:\t%s\n", r.Record)
	fmt.Fprintf(tw, "Action:\t%s\n", r.Action)
	if v := r.Verdict; v != nil && v.Rule != "" {
		said := v.Rule + " (decided " + v.Decided + ")"
		if v.Why != "" {
			said += ": " + v.Why
		}
		fmt.Fprintf(tw, "Rule:\t%s\n", said)
	}
	if r.OnDelete != "" {
		fmt.Fprintf(tw, "Rolls:\tonly when pods are deleted (%s)\n", r.OnDelete)
	}
	if cs := r.ChangeSet; cs != nil {
		fmt.Fprintf(tw, "Change set:\twaiting since %s (last change %s): %s\n", cs.Opened, cs.Last, strings.Join(cs.Sources, ", "))
	}
	var ids []string
	if r.TemplateChangeSet != "" {
		ids = append(ids, fmt.Sprintf("pod template %q (recorded %q)", r.TemplateChangeSet, r.RecordedChangeSet))
	}
	for _, u := range r.Uses {
		if u.ChangeSet != "" {
			ids = append(ids, fmt.Sprintf("%s %s %q", u.Kind, u.Name, u.ChangeSet))
		}
	}
	if len(ids) > 0 {
		fmt.Fprintf(tw, "Change-set ids:\t%s\n", strings.Join(ids, ", "))
	}
	for _, p := range r.Producers {
		fmt.Fprintf(tw, "Producer:\t%s %s writes Secret %s: %s (%s) %s\n", p.Kind, p.Name, p.Secret, p.State, p.Reason, p.Message)
	}
	for _, c := range r.Changes {
		fmt.Fprintf(tw, "Changed:\t%s %s, keys: %s\n", c.Kind, c.Name, cause.KeyList(c.Keys))
	}
	for _, c := range r.Ignored {
		fmt.Fprintf(tw, "Ignored:\t%s %s, keys: %s (rule %s)\n", c.Kind, c.Name, cause.KeyList(c.Keys), c.Rule)
	}
	for _, m := range r.Missing {
		if len(m.Keys) == 0 {
			fmt.Fprintf(tw, "Missing:\t%s %s is gone, the pods need it\n", m.Kind, m.Name)
		} else {
			fmt.Fprintf(tw, "Missing:\t%s %s has no key %s, the pods need it\n", m.Kind, m.Name, strings.Join(m.Keys, ", "))
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(tw, "Note:\t%s\n", n)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nUses:")
	if len(r.Uses) == 0 {
		fmt.Fprintln(w, "  nothing")
	}
	for _, u := range r.Uses {
		writeUse(w, u)
	}
	fmt.Fprintln(w, "\nLast restarts:")
	if len(r.Restarts) == 0 {
		fmt.Fprintln(w, "  none seen (Events expire, after an hour by default)")
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, e := range r.Restarts {
		count := ""
		if e.Count > 1 {
			count = fmt.Sprintf(" (x%d)", e.Count)
		}
		fmt.Fprintf(tw, "  %s\t%s%s\t%s\n", e.Time.UTC().Format(time.RFC3339), e.Reason, count, e.Note)
	}
	return tw.Flush()
}

// writeUse writes one object a workload uses.
func writeUse(w io.Writer, u Use) {
	state := u.State
	if u.StateReason != "" {
		state += ": " + u.StateReason
	}
	fmt.Fprintf(w, "  %s %s (%s)\n", u.Kind, u.Name, state)
	fmt.Fprintf(w, "    %s; %s\n", verdictText(u.Verdict, u.Rule), readsText(u.AllKeys, u.Keys, u.Required, u.Optional))
	fmt.Fprintf(w, "    found by: %s\n", strings.Join(u.Sources, ", "))
	if p := u.Pin; p != nil {
		switch p.State {
		case PinPinned:
			fmt.Fprintf(w, "    pinned: the pods read snapshot %s\n", p.Snapshot)
			if p.LeftByRollback {
				fmt.Fprintf(w, "    its content now (%s) is what a rollback left: not rolled forward to\n", p.Live)
			} else if p.Live != "" {
				fmt.Fprintf(w, "    its content now is %s\n", p.Live)
			}
		case PinFloating:
			fmt.Fprintf(w, "    floating: the pods read it live (%s)\n", p.Reason)
		default:
			fmt.Fprintf(w, "    pinned from the next restart on\n")
		}
	}
	for _, p := range u.Paths {
		fmt.Fprintf(w, "    via %s\n", pathText(p))
	}
	if len(u.Hashes) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "    KEY\tRECORDED\tCURRENT\tSTATUS")
	for _, h := range u.Hashes {
		fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\n", h.Key, dash(h.Recorded), dash(h.Current), h.Status)
	}
	_ = tw.Flush()
}

// WriteText writes the report for people.
func (r ConfigReport) WriteText(w io.Writer) error {
	state := r.State
	if r.StateReason != "" {
		state += ": " + r.StateReason
	}
	fmt.Fprintf(w, "%s %s/%s (%s)\n", r.Kind, r.Namespace, r.Name, state)
	fmt.Fprintf(w, "Keys: %s\n", dash(strings.Join(r.Keys, ", ")))
	for _, n := range r.Notes {
		fmt.Fprintf(w, "Note: %s\n", n)
	}
	fmt.Fprintln(w, "\nUsed by:")
	if len(r.Users) == 0 {
		fmt.Fprintln(w, "  no workload")
	}
	for _, u := range r.Users {
		effect := u.Effect
		if u.Reason != "" {
			effect += ": " + u.Reason
		}
		fmt.Fprintf(w, "  %s %s\n", u.Kind, u.Name)
		fmt.Fprintf(w, "    %s; %s\n", verdictText(u.Verdict, u.Rule), readsText(u.AllKeys, u.Keys, nil, false))
		fmt.Fprintf(w, "    a change: %s\n", effect)
		for _, p := range u.Paths {
			fmt.Fprintf(w, "    via %s\n", pathText(p))
		}
	}
	fmt.Fprintln(w, "\nA change of each key restarts:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, k := range r.ByKey {
		line := dash(strings.Join(k.Restarts, ", "))
		if len(k.OnDelete) > 0 {
			line += "; template only, pods roll when deleted: " + strings.Join(k.OnDelete, ", ")
		}
		fmt.Fprintf(tw, "  %s\t%s\n", k.Key, line)
	}
	line := dash(strings.Join(r.NewKey, ", "))
	if len(r.NewKeyOnDelete) > 0 {
		line += "; template only, pods roll when deleted: " + strings.Join(r.NewKeyOnDelete, ", ")
	}
	fmt.Fprintf(tw, "  (a new key)\t%s\n", line)
	return tw.Flush()
}

// WriteText writes the graph for people: each workload and what it uses.
func (g Graph) WriteText(w io.Writer) error {
	if len(g.Workloads) == 0 {
		_, err := fmt.Fprintln(w, "No workloads.")
		return err
	}
	for i, gw := range g.Workloads {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s %s/%s", gw.Kind, gw.Namespace, gw.Name)
		if !gw.Watched {
			fmt.Fprintf(w, " (not watched: %s)", gw.Excluded)
		}
		fmt.Fprintln(w)
		if gw.Error != "" {
			fmt.Fprintf(w, "  error: %s\n", gw.Error)
		}
		if len(gw.Uses) == 0 {
			fmt.Fprintln(w, "  uses nothing")
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, u := range gw.Uses {
			var via []string
			for _, p := range u.Paths {
				via = append(via, pathText(p))
			}
			extra := ""
			if u.Verdict != "count" {
				extra = "\t" + verdictText(u.Verdict, u.Rule)
			}
			if u.State != StatePresent {
				extra += "\t(" + u.State + ")"
			}
			fmt.Fprintf(tw, "  %s %s\t%s\t%s%s\n", u.Kind, u.Name, readsText(u.AllKeys, u.Keys, nil, false), strings.Join(via, "; "), extra)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func verdictText(verdict, rule string) string {
	switch verdict {
	case "drop":
		return "dropped by rule " + rule
	case "ignore":
		return "ignored by rule " + rule + " (recorded, restarts nothing)"
	}
	return "counts"
}

func readsText(all bool, keys, required []string, optional bool) string {
	s := "every key"
	if !all {
		var ks []string
		for _, k := range keys {
			for _, r := range required {
				if r == k {
					k += " (required)"
				}
			}
			ks = append(ks, k)
		}
		s = "keys " + strings.Join(ks, ", ")
		if len(keys) == 0 {
			s = "no key"
		}
	}
	if optional {
		s += "; optional"
	}
	return s
}

func pathText(p Path) string {
	s := p.Via
	if p.Where != "" {
		s += " " + p.Where
	}
	if len(p.Keys) > 0 {
		s += " (" + strings.Join(p.Keys, ", ") + ")"
	}
	return s
}

func yesNo(b bool, why string) string {
	if b {
		return "yes"
	}
	return "no: " + why
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
