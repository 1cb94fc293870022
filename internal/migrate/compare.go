package migrate

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/watcher-dev/watcher/internal/cause"
	"github.com/watcher-dev/watcher/internal/note"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Event is one Event on a workload, as read by package cli.
type Event struct {
	Kind      string    `json:"kind"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Reason    string    `json:"reason"`
	Note      string    `json:"note"`
	Time      time.Time `json:"time"`
	Count     int       `json:"count"`
}

// The outcomes of Compare, per workload.
const (
	Agree        = "agree"
	OnlyWatcher  = "only watcher"
	OnlyReloader = "only Reloader"
)

// Outcome is what watcher would have done to one workload, and what
// Reloader did, since a time.
type Outcome struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Result is Agree, OnlyWatcher or OnlyReloader.
	Result string `json:"result"`
	// Watcher are the notes of watcher's WouldRestart Events; Reloader,
	// what says Reloader reloaded (its Events, its marks).
	Watcher  []string `json:"watcher"`
	Reloader []string `json:"reloader"`
}

// CompareInput is what Compare compares.
type CompareInput struct {
	// Since is the start of the window.
	Since time.Time
	// Events are the workloads' Events: watcher's WouldRestart and
	// Reloader's Reloaded (others are left out).
	Events []Event
	// Workloads carry Reloader's marks (Census, or MarksOf per workload).
	Workloads []Workload
}

// Comparison is Compare's result.
type Comparison struct {
	Since    time.Time      `json:"since"`
	Outcomes []Outcome      `json:"outcomes"`
	Counts   map[string]int `json:"counts"`
}

// Compare says, per workload that watcher would have restarted
// (cause.ReasonWouldRestart Events) or that Reloader reloaded (Events
// ReasonReloaded, marks written) since in.Since, whether both did:
//
//	watcher WouldRestart   Reloader Reloaded or a mark   Result
//	yes                    yes                           agree
//	yes                    no                            only watcher
//	no                     yes                           only Reloader
//
// A mark whose time is unknown says nothing. Sorted by namespace, kind and
// name.
func Compare(in CompareInput) Comparison {
	type both struct{ watcher, reloader []string }
	by := map[[3]string]*both{}
	at := func(kind, ns, name string) *both {
		k := [3]string{ns, kind, name}
		if by[k] == nil {
			by[k] = &both{}
		}
		return by[k]
	}
	for _, e := range in.Events {
		// Anyone who may write Events in a namespace may write these: only
		// those about a workload by a valid name count, and their text is
		// quoted and cut when shown.
		if _, ok := workload.ByName(e.Kind); !ok || len(validation.IsDNS1123Subdomain(e.Name)) > 0 || e.Time.Before(in.Since) {
			continue
		}
		times := ""
		if e.Count > 1 {
			times = fmt.Sprintf(" (%d times)", e.Count)
		}
		switch e.Reason {
		case cause.ReasonWouldRestart:
			b := at(e.Kind, e.Namespace, e.Name)
			b.watcher = append(b.watcher, e.Time.UTC().Format(time.RFC3339)+" "+shown(e.Note)+times)
		case ReasonReloaded:
			b := at(e.Kind, e.Namespace, e.Name)
			b.reloader = append(b.reloader, e.Time.UTC().Format(time.RFC3339)+" Event "+e.Reason+": "+shown(e.Note)+times)
		}
	}
	for _, w := range in.Workloads {
		for _, m := range w.Marks {
			if m.Time.IsZero() || m.Time.Before(in.Since) {
				continue
			}
			b := at(w.Kind, w.Namespace, w.Name)
			b.reloader = append(b.reloader, strings.TrimSpace(m.Time.UTC().Format(time.RFC3339)+" "+m.Via+" "+shown(m.Object)))
		}
	}
	out := Comparison{Since: in.Since.UTC(), Outcomes: []Outcome{}, Counts: map[string]int{Agree: 0, OnlyWatcher: 0, OnlyReloader: 0}}
	for _, k := range slices.SortedFunc(maps.Keys(by), func(a, b [3]string) int { return strings.Compare(strings.Join(a[:], "/"), strings.Join(b[:], "/")) }) {
		b := by[k]
		o := Outcome{Namespace: k[0], Kind: k[1], Name: k[2], Watcher: nonNil(b.watcher), Reloader: nonNil(b.reloader)}
		slices.Sort(o.Watcher)
		slices.Sort(o.Reloader)
		switch {
		case len(b.watcher) > 0 && len(b.reloader) > 0:
			o.Result = Agree
		case len(b.watcher) > 0:
			o.Result = OnlyWatcher
		default:
			o.Result = OnlyReloader
		}
		out.Counts[o.Result]++
		out.Outcomes = append(out.Outcomes, o)
	}
	return out
}

// WriteText prints c for people.
func (c Comparison) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "Since %s: %d agree, %d only watcher, %d only Reloader\n", c.Since.Format(time.RFC3339), c.Counts[Agree], c.Counts[OnlyWatcher], c.Counts[OnlyReloader])
	if len(c.Outcomes) == 0 {
		_, err := fmt.Fprintln(w, "Neither watcher (WouldRestart Events) nor Reloader (Reloaded Events, marks) restarted anything in that time.")
		return err
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RESULT\tWORKLOAD")
	for _, o := range c.Outcomes {
		fmt.Fprintf(tw, "%s\t%s %s/%s\n", o.Result, o.Kind, o.Namespace, o.Name)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, o := range c.Outcomes {
		fmt.Fprintf(w, "\n%s %s/%s: %s\n", o.Kind, o.Namespace, o.Name, o.Result)
		for _, s := range o.Watcher {
			fmt.Fprintf(w, "  watcher:  %s\n", s)
		}
		for _, s := range o.Reloader {
			fmt.Fprintf(w, "  Reloader: %s\n", s)
		}
		if o.Result != Agree {
			fmt.Fprintf(w, "  why: watcher explain %s/%s -n %s\n", strings.ToLower(o.Kind), o.Name, o.Namespace)
		}
	}
	return nil
}

// maxShown is the most of a text written in a tenant's namespace (an
// Event's note, the object Reloader's mark names) that --compare shows.
const maxShown = 200

// shown makes such a text inert: cut to maxShown bytes (marked) and every
// unprintable rune (a terminal escape, a new line) replaced by '?'.
func shown(s string) string {
	cut := note.Cut(s, maxShown)
	if len(cut) < len(s) {
		cut += "…"
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return '?'
	}, cut)
}
