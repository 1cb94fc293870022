package cli

// watcher stale: every workload whose pods run configuration older than
// the current one, since when and why.
//
// A workload is stale when explain's decision (the controller's: package
// explain's gatherer and plan.Decide) would restart it or found a change
// a rule ignores, a key its pods need is missing, or, for a workload that
// pins its config, its template pins a snapshot whose content is not its
// source's now (compared in memory, key by key; only key names are
// printed). Why, the first that holds (judgeStale); the first two are
// the controller's chain (package verdict, run by explain on what was
// read), never worked out here:
//
//	what the workload shows                               Why
//	the chain's rule RolledBack or LeftByRollback, or
//	  every stale source's content is what a rollback
//	  left (verdict.LeftByRollback, explain.Pin)          rolled back
//	the chain's rule InRelease                            in release
//	not watched (namespaces, selectors)                   not watched
//	a stale source dropped or ignored by a rule           opted out
//	a pending change set, a ReloadPolicy's pending entry,
//	  a key the pods need missing                         held
//	its last rollout failed (ProgressDeadlineExceeded)    failed
//	update strategy OnDelete (or a full partition)        OnDelete
//	anything else (watcher in --dry-run, or about to)     not restarted yet
//
// Since is the oldest change time known: the change set's opening, the
// ReloadPolicy's pending since, and each stale source's last write of its
// content (metadata.managedFields), when readable.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/api/v1alpha1"
	"github.com/watcher-dev/watcher/internal/attribution"
	"github.com/watcher-dev/watcher/internal/explain"
	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/verdict"
	"github.com/watcher-dev/watcher/internal/workload"
)

// StaleReport is what watcher stale says. Its JSON form is stable: fields
// may be added, never renamed or removed.
type StaleReport struct {
	Workloads []Stale `json:"workloads"`
}

// Stale is one workload whose pods run configuration older than the
// current one.
type Stale struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Why is rolled back, in release, not watched, opted out, held,
	// failed, OnDelete or not restarted yet; Detail says more.
	Why    string `json:"why"`
	Detail string `json:"detail,omitempty"`
	// Since is the oldest change time known.
	Since *time.Time `json:"since,omitempty"`
	// Sources are the ConfigMaps and Secrets whose current content the
	// pods do not run.
	Sources []StaleSource `json:"sources"`
}

// StaleSource is a source whose current content the pods do not run.
type StaleSource struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Keys are the keys changed (names only), when known.
	Keys []string `json:"keys,omitempty"`
	// Snapshot is the snapshot the pods read, for a pinned source.
	Snapshot string `json:"snapshot,omitempty"`
}

// The answers of Stale.Why.
const (
	whyRolledBack = "rolled back"
	whyInRelease  = "in release"
	whyNotWatched = "not watched"
	whyOptedOut   = "opted out"
	whyHeld       = "held"
	whyFailed     = "failed"
	whyOnDelete   = "OnDelete"
	whyNotYet     = "not restarted yet"
)

// staleFacts is what stale read of one workload.
type staleFacts struct {
	report explain.WorkloadReport
	// drift are its pinned sources whose snapshot is not the live content.
	drift []StaleSource
	// annotations are the workload's own.
	annotations map[string]string
	// policy is a ReloadPolicy's pending entry for it, named held.
	policy     *v1alpha1.PendingRestart
	policyName string
	// failed says why its last rollout failed, "" when it did not.
	failed string
	// written is when each source ("Kind/name") last had its content
	// written, when known.
	written map[string]time.Time
}

// judgeStale decides whether a workload is stale, and why (see the table
// of the file's comment). It is pure.
func judgeStale(f staleFacts) (Stale, bool) {
	rep := f.report
	st := Stale{Kind: rep.Kind, Namespace: rep.Namespace, Name: rep.Name}
	add := func(s StaleSource) {
		i := slices.IndexFunc(st.Sources, func(o StaleSource) bool { return o.Kind == s.Kind && o.Name == s.Name })
		if i < 0 {
			st.Sources = append(st.Sources, s)
			return
		}
		if s.Snapshot != "" {
			st.Sources[i].Snapshot = s.Snapshot
		}
		st.Sources[i].Keys = slices.Compact(slices.Sorted(slices.Values(append(st.Sources[i].Keys, s.Keys...))))
	}
	rule := ""
	if rep.Verdict != nil {
		rule = rep.Verdict.Rule
	}
	if rep.Pending || rule == verdict.RuleInRelease || (rep.Verdict != nil && rep.Verdict.Stale) {
		for _, c := range rep.Changes {
			add(StaleSource{Kind: c.Kind, Name: c.Name, Keys: c.Keys})
		}
	}
	for _, c := range rep.Ignored {
		add(StaleSource{Kind: c.Kind, Name: c.Name, Keys: c.Keys})
	}
	for _, m := range rep.Missing {
		add(StaleSource{Kind: m.Kind, Name: m.Name})
	}
	for _, d := range f.drift {
		add(d)
	}
	if len(st.Sources) == 0 {
		return st, false
	}
	slices.SortFunc(st.Sources, func(a, b StaleSource) int { return strings.Compare(a.Kind+"/"+a.Name, b.Kind+"/"+b.Name) })
	var since []time.Time
	for _, s := range st.Sources {
		if t, ok := f.written[s.Kind+"/"+s.Name]; ok {
			since = append(since, t)
		}
	}
	pending := pendingOf(f.annotations)
	if pending != nil {
		since = append(since, pending.Opened)
	}
	if f.policy != nil {
		since = append(since, f.policy.Since.Time)
	}
	if len(since) > 0 {
		t := slices.MinFunc(since, time.Time.Compare).UTC()
		st.Since = &t
	}
	optedOut := optedOutRule(rep, st.Sources)
	switch {
	case rule == verdict.RuleRolledBack:
		st.Why, st.Detail = whyRolledBack, "its template pins the contents of an older revision (a rollback): watcher records the rollback and restarts nothing"
	case rule == verdict.RuleLeftByRollback || leftByRollback(rep, st.Sources):
		st.Why, st.Detail = whyRolledBack, "a rollback left "+f.annotations[pin.RolledBackFrom]+": watcher does not roll forward until a new content arrives or "+pin.RolledBackFrom+" is removed"
	case rule == verdict.RuleInRelease:
		st.Why, st.Detail = whyInRelease, "its own rollout (change set "+rep.TemplateChangeSet+") carries the change: watcher records it and restarts nothing"
	case !rep.Watched:
		st.Why, st.Detail = whyNotWatched, rep.Excluded
	case optedOut != "":
		st.Why, st.Detail = whyOptedOut, "rule "+optedOut
	case pending != nil:
		st.Why, st.Detail = whyHeld, "its change set waits since "+pending.Opened.UTC().Format(time.RFC3339)+" (last change "+pending.Last.UTC().Format(time.RFC3339)+")"
	case f.policy != nil:
		st.Why, st.Detail = whyHeld, "ReloadPolicy "+f.policyName+": "+f.policy.Reason
	case len(rep.Missing) > 0:
		st.Why, st.Detail = whyHeld, "a key the pods need is missing"
	case f.failed != "":
		st.Why, st.Detail = whyFailed, f.failed
	case rep.OnDelete != "":
		st.Why, st.Detail = whyOnDelete, "its pods roll only when deleted ("+rep.OnDelete+")"
	default:
		st.Why, st.Detail = whyNotYet, "a restart is due that watcher has not written (it runs with --dry-run, holds it, or is about to write it)"
	}
	return st, true
}

// leftByRollback reports whether every one of sources is pinned to a
// snapshot and its content now is what a rollback left, as the chain
// says it (explain.Pin.LeftByRollback, verdict.LeftByRollback).
func leftByRollback(rep explain.WorkloadReport, sources []StaleSource) bool {
	for _, s := range sources {
		i := slices.IndexFunc(rep.Uses, func(u explain.Use) bool { return u.Kind == s.Kind && u.Name == s.Name })
		if i < 0 || rep.Uses[i].Pin == nil || !rep.Uses[i].Pin.LeftByRollback {
			return false
		}
	}
	return len(sources) > 0
}

// optedOutRule returns the rule that drops or ignores one of sources for
// the workload of rep, "" when none does.
func optedOutRule(rep explain.WorkloadReport, sources []StaleSource) string {
	for _, u := range rep.Uses {
		if u.Verdict == plan.Count.String() || u.Rule == "" {
			continue
		}
		if slices.ContainsFunc(sources, func(s StaleSource) bool { return s.Kind == u.Kind && s.Name == u.Name }) {
			return u.Rule
		}
	}
	return ""
}

// pendingOf reads the workload's pending change set (its signature is not
// checked: for display), nil when none.
func pendingOf(ann map[string]string) *guard.Pending {
	v, ok := ann[guard.PendingAnnotation]
	if !ok {
		return nil
	}
	p, err := guard.ReadPending(v)
	if err != nil {
		return nil
	}
	return &p
}

// failedRollout says why obj's last rollout failed, "" when it did not (or
// that cannot be told from its status).
func failedRollout(obj client.Object) string {
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		return ""
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse {
			return "its last rollout failed (" + c.Reason + "): watcher holds restarts of the same change"
		}
	}
	return ""
}

// stale runs watcher stale on the namespace of r, or on every namespace.
func (c *command) stale(ctx context.Context, r *reader, s explain.Settings, out io.Writer) error {
	ns := r.namespace
	if c.allNamespaces {
		ns = metav1.NamespaceAll
	}
	ws, err := r.workloads(ctx, ns)
	if err != nil {
		return err
	}
	byNS := map[string][]client.Object{}
	for _, w := range ws {
		byNS[w.GetNamespace()] = append(byNS[w.GetNamespace()], w)
	}
	rep := StaleReport{Workloads: []Stale{}}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range byNS {
			if !yield(n) {
				return
			}
		}
	}) {
		got, err := c.staleIn(ctx, r, s, name, byNS[name])
		if err != nil {
			return err
		}
		rep.Workloads = append(rep.Workloads, got...)
	}
	if c.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return rep.WriteText(out)
}

// staleIn judges the workloads ws of namespace ns.
func (c *command) staleIn(ctx context.Context, r *reader, s explain.Settings, ns string, ws []client.Object) ([]Stale, error) {
	nr := &reader{c: r.c, namespace: ns}
	err := nr.hashKey(ctx, &s, keySources{secret: c.explainKeySecret,
		watcherNamespace: c.watcherNamespace, hashKeySecret: c.installation.HashKeySecret})
	if err != nil {
		return nil, err
	}
	if s.HashKeyID == "" {
		fmt.Fprintf(c.stderr, "%s stale: namespace %s: records not compared, only pinned workloads checked: %s\n", c.prog, ns, s.HashKeyProblem)
	}
	configs := map[string]explain.Config{}
	snaps := &snapshots{r: nr, ns: ns, read: map[string]snap{}}
	held := policyHolds(ctx, nr, ns)
	var out []Stale
	for _, obj := range ws {
		w := explain.Workload{Object: obj, Configs: map[string]explain.Config{}}
		origins, err := s.Resolver.Explain(obj, s.Configs)
		if err != nil {
			fmt.Fprintf(c.stderr, "%s stale: %s/%s: %v\n", c.prog, ns, obj.GetName(), err)
			continue
		}
		for _, o := range origins {
			cfg, ok := configs[o.Ref.ID()]
			if !ok {
				cfg = nr.config(ctx, o.Ref.Kind, ns, o.Ref.Name, true)
				configs[o.Ref.ID()] = cfg
			}
			w.Configs[o.Ref.ID()] = cfg
		}
		if err := nr.pinFacts(ctx, &w); err != nil {
			fmt.Fprintf(c.stderr, "%s stale: %s/%s: pins not checked: %v\n", c.prog, ns, obj.GetName(), err)
		}
		report, err := explain.ExplainWorkload(s, w)
		if err != nil {
			fmt.Fprintf(c.stderr, "%s stale: %s/%s: %v\n", c.prog, ns, obj.GetName(), err)
			continue
		}
		f := staleFacts{report: report, annotations: obj.GetAnnotations(), failed: failedRollout(obj), written: map[string]time.Time{}}
		if p, ok := held[report.Kind+"/"+obj.GetName()]; ok {
			f.policy, f.policyName = &p.pending, p.policy
		}
		if f.drift, err = nr.drift(ctx, snaps, obj); err != nil {
			return nil, err
		}
		st, ok := judgeStale(f)
		if !ok {
			continue
		}
		for _, src := range st.Sources {
			if t, ok := nr.lastWrite(ctx, refs.Kind(src.Kind), ns, src.Name); ok {
				f.written[src.Kind+"/"+src.Name] = t
			}
		}
		st, _ = judgeStale(f) // again, with the times of the sources
		out = append(out, st)
	}
	return out, nil
}

// drift returns the pinned sources of obj whose snapshot's content is not
// the source's now, with the keys that differ. Both are read whole and
// reduced to fingerprints at once; a source or snapshot gone is left out.
func (r *reader) drift(ctx context.Context, snaps *snapshots, obj client.Object) ([]StaleSource, error) {
	kind, ok := workload.Of(obj)
	if !ok || !kind.Pinnable {
		return nil, nil
	}
	tmpl, err := kind.PodTemplate(obj)
	if err != nil {
		return nil, nil //nolint:nilerr // no template: nothing pinned
	}
	pins := pin.Parse(tmpl.Annotations[pin.PinsAnnotation])
	var out []StaleSource
	for _, src := range sortedSources(pins) {
		sn, err := snaps.get(ctx, src, pins[src])
		if err != nil {
			return nil, err
		}
		live := object(src.Kind)
		err = r.c.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: src.Name}, live)
		switch {
		case apierrors.IsNotFound(err), sn.Gone:
			continue
		case err != nil:
			return nil, fmt.Errorf("get %s %s/%s: %w", src.Kind, obj.GetNamespace(), src.Name, err)
		}
		if keys := changedKeys(sn.Keys, fingerprint(live)); len(keys) > 0 {
			k := refs.ConfigMap
			if src.Kind == pin.Secret {
				k = refs.Secret
			}
			out = append(out, StaleSource{Kind: string(k), Name: src.Name, Keys: keys, Snapshot: pins[src]})
		}
	}
	return out, nil
}

// lastWrite returns when the content of a ConfigMap or Secret was last
// written, from its managedFields (metadata only).
func (r *reader) lastWrite(ctx context.Context, kind refs.Kind, ns, name string) (time.Time, bool) {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(string(kind)))
	if err := r.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj); err != nil {
		return time.Time{}, false
	}
	ws := attribution.FromManagedFields(obj.ManagedFields)
	if len(ws) == 0 {
		return time.Time{}, false
	}
	return ws[0].Time, true
}

// policyHold is a ReloadPolicy's pending entry.
type policyHold struct {
	policy  string
	pending v1alpha1.PendingRestart
}

// policyHolds reads the pending entries of the ReloadPolicies of ns, by
// "Kind/name" of the workload; none when they cannot be read.
func policyHolds(ctx context.Context, r *reader, ns string) map[string]policyHold {
	out := map[string]policyHold{}
	var list v1alpha1.ReloadPolicyList
	if err := r.c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return out
	}
	for _, p := range list.Items {
		for _, e := range p.Status.Pending {
			out[string(e.Kind)+"/"+e.Name] = policyHold{policy: p.Name, pending: e}
		}
	}
	return out
}

// WriteText writes rep for people.
func (rep StaleReport) WriteText(w io.Writer) error {
	if len(rep.Workloads) == 0 {
		_, err := fmt.Fprintln(w, "No workload runs configuration older than the current one.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKLOAD\tWHY\tSINCE\tSOURCES")
	for _, s := range rep.Workloads {
		since := "-"
		if s.Since != nil {
			since = s.Since.Format(time.RFC3339)
		}
		var srcs []string
		for _, src := range s.Sources {
			t := src.Kind + " " + src.Name
			if len(src.Keys) > 0 {
				t += " (keys: " + strings.Join(src.Keys, ", ") + ")"
			}
			srcs = append(srcs, t)
		}
		fmt.Fprintf(tw, "%s %s/%s\t%s\t%s\t%s\n", s.Kind, s.Namespace, s.Name, s.Why, since, strings.Join(srcs, "; "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, s := range rep.Workloads {
		fmt.Fprintf(w, "%s %s/%s: %s: %s\n", s.Kind, s.Namespace, s.Name, s.Why, s.Detail)
	}
	return nil
}
