package explain

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/cause"
	"github.com/watcher-dev/watcher/internal/gather"
	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/producer"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/resolve"
	"github.com/watcher-dev/watcher/internal/verdict"
	"github.com/watcher-dev/watcher/internal/workload"
)

// The states of a workload's record (WorkloadReport.Record), read as the
// controller reads it (gather.Record).
const (
	RecordAbsent     = gather.RecordAbsent     // never adopted: watcher adopts it, no restart
	RecordCurrent    = gather.RecordCurrent    // made with the installation's hash key
	RecordOtherKey   = gather.RecordOtherKey   // made with another key: adopted again, no restart
	RecordUnreadable = gather.RecordUnreadable // not valid JSON: adopted again, no restart
	RecordUnknownKey = gather.RecordUnknownKey // present, but the hash key could not be read
)

// The states of a referenced object (Use.State).
const (
	StatePresent    = "present"
	StateAbsent     = "absent"
	StateUnreadable = "unreadable"  // the reader may not read it
	StateNotWatched = "not-watched" // watcher does not see it: as absent
)

// ActionUnknown is WorkloadReport.Action when nothing can be decided: the
// hash key or a referenced object could not be read.
const ActionUnknown = "unknown"

// WorkloadReport is what explain says of a workload. Its JSON form is
// stable: fields may be added, never renamed or removed.
type WorkloadReport struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Watched is false when watcher never handles the workload; Excluded
	// then says why.
	Watched  bool   `json:"watched"`
	Excluded string `json:"excluded,omitempty"`
	// Record is the state of its watcher.dev/config-hashes record: absent,
	// current, other-key, unreadable, or unknown (no hash key to check it).
	Record string `json:"record"`
	// Action is what watcher would do now (plan.Action: none, forget,
	// adopt, refresh, restart), or unknown.
	Action string `json:"action"`
	// Pending is true when a restart is pending: Action is restart.
	Pending bool `json:"pending"`
	// Status says it in one sentence.
	Status string `json:"status"`
	// Changes are why it would restart; Ignored, changes recorded
	// silently by a rule; Missing, required keys that hold every restart.
	Changes []Change  `json:"changes,omitempty"`
	Ignored []Change  `json:"ignored,omitempty"`
	Missing []Missing `json:"missing,omitempty"`
	// OnDelete, when set, says why a restart rolls no pod until the pods
	// are deleted (OnDelete, partition).
	OnDelete string `json:"onDelete,omitempty"`
	// Uses are the objects it refers to, sorted by kind and name.
	Uses []Use `json:"uses"`
	// Restarts are its last restarts, newest first (at most MaxRestarts).
	Restarts []Event `json:"restarts"`
	// Notes are remarks: what could not be read, malformed annotations.
	Notes []string `json:"notes,omitempty"`
	// ChangeSet is the change set its restart waits for, as kept on the
	// workload (docs/change-sets.md); nil when none.
	ChangeSet *ChangeSet `json:"changeSet,omitempty"`
	// Producers are the producers of the Secrets it uses
	// (docs/change-sets.md): its restart waits for those not current.
	Producers []Producer `json:"producers,omitempty"`
	// TemplateChangeSet is its pod template's watcher.dev/change-set id,
	// and RecordedChangeSet the one recorded with its record.
	TemplateChangeSet string `json:"templateChangeSet,omitempty"`
	RecordedChangeSet string `json:"recordedChangeSet,omitempty"`
	// Verdict is what the rules after the decision (package verdict) made
	// of it; nil when nothing was decided (Action unknown).
	Verdict *Verdict `json:"verdict,omitempty"`
}

// ChangeSet is the change set a workload's restart waits for, read from
// guard.PendingAnnotation (its signature is not checked here) and its
// settle annotations.
type ChangeSet struct {
	// Opened is when the set opened, Last when a source of it last
	// changed (RFC 3339).
	Opened string `json:"opened"`
	Last   string `json:"last"`
	// Sources are its changed sources ("Kind name").
	Sources []string `json:"sources"`
	// Settle and SettleMax are the workload's own settle annotations, ""
	// for the installation's.
	Settle    string `json:"settle,omitempty"`
	SettleMax string `json:"settleMax,omitempty"`
	// SiblingsRefreshed is true once its other ExternalSecrets were asked
	// to sync for this set.
	SiblingsRefreshed bool `json:"siblingsRefreshed,omitempty"`
}

// Producer is a producer of a Secret a workload uses, and its state.
type Producer struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Secret string `json:"secret"`
	// State is Current, Progressing or Failed; Reason and Message are the
	// evidence.
	State   string `json:"state"`
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
}

// producers returns the producers of the Secrets of uses among vs, sorted.
func producers(uses []Use, vs []producer.Verdict) []Producer {
	var out []Producer
	for _, v := range vs {
		if !slices.ContainsFunc(uses, func(u Use) bool { return u.Kind == v.Source.Kind && u.Name == v.Source.Name }) {
			continue
		}
		out = append(out, Producer{Kind: v.Producer.Kind, Name: v.Producer.Name, Secret: v.Source.Name,
			State: v.State.String(), Reason: v.Reason, Message: v.Message})
	}
	slices.SortFunc(out, func(a, b Producer) int {
		return cmp.Or(cmp.Compare(a.Secret, b.Secret), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// changeSet reads the change set kept on obj; nil when none.
func changeSet(obj client.Object, notes *[]string) *ChangeSet {
	ann := obj.GetAnnotations()
	v, ok := ann[guard.PendingAnnotation]
	if !ok {
		return nil
	}
	p, err := guard.ReadPending(v)
	if err != nil {
		*notes = append(*notes, "unreadable change set: "+err.Error())
		return nil
	}
	cs := &ChangeSet{Opened: p.Opened.Format(time.RFC3339), Last: p.Last.Format(time.RFC3339),
		Settle: ann[optin.Settle], SettleMax: ann[optin.SettleMax], SiblingsRefreshed: p.Refreshed}
	for _, src := range p.Sources {
		name := src.Object.Kind + " " + src.Object.Name
		if len(src.Keys) > 0 {
			name += " (keys: " + strings.Join(src.Keys, ", ") + ")"
		}
		cs.Sources = append(cs.Sources, name)
	}
	return cs
}

// Change is one object whose keys changed since the record.
type Change struct {
	Kind string   `json:"kind"`
	Name string   `json:"name"`
	Keys []string `json:"keys"`
	// SealedSecret and ChangedBy: see Config.
	SealedSecret string   `json:"sealedSecret,omitempty"`
	ChangedBy    []string `json:"changedBy,omitempty"`
	// Rule, for an ignored change, is the rule that ignored it.
	Rule string `json:"rule,omitempty"`
}

// Missing is an object lacking keys the pods need.
type Missing struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Keys are the missing keys; empty when the object itself is gone.
	Keys []string `json:"keys,omitempty"`
}

// Use is one object a workload refers to.
type Use struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// AllKeys is true when every key is read (envFrom, a whole volume);
	// Keys are the keys read otherwise, Required those the pods need.
	AllKeys  bool     `json:"allKeys"`
	Keys     []string `json:"keys,omitempty"`
	Required []string `json:"required,omitempty"`
	// Optional is true when the pods start without the object.
	Optional bool `json:"optional"`
	// Sources are the resolver's sources that found it ("pod spec",
	// "reload lists"); Paths, the places.
	Sources []string `json:"sources"`
	Paths   []Path   `json:"paths"`
	// Verdict is count, ignore or drop (plan.Verdict); Rule names the rule
	// that said ignore or drop: a rule of plan.NewChain, or
	// ignored-namespace.
	Verdict string `json:"verdict"`
	Rule    string `json:"rule,omitempty"`
	// State is present, absent, unreadable or not-watched; StateReason
	// says why for the last two.
	State       string `json:"state"`
	StateReason string `json:"stateReason,omitempty"`
	// Hashes compare, key by key, the record with the object now.
	Hashes []KeyHash `json:"hashes,omitempty"`
	// ChangeSet is the object's watcher.dev/change-set id, if any.
	ChangeSet string `json:"changeSet,omitempty"`
	// Pin says, for a workload that pins its config (package pin), whether
	// it is pinned (and to which snapshot) or floats (and why).
	Pin *Pin `json:"pin,omitempty"`
}

// KeyHash compares one key's recorded and current hash: the first
// HashPrefix hex digits of each, keyed HMACs that reveal nothing of the
// value.
type KeyHash struct {
	Key      string `json:"key"`
	Recorded string `json:"recorded,omitempty"`
	Current  string `json:"current,omitempty"`
	// Status is same, changed, added, removed, not-recorded (read since
	// the record: adopted, no restart) or summarized (the record holds one
	// digest for the object: Key is "*").
	Status string `json:"status"`
}

// MaxRestarts is how many past restarts a report lists.
const MaxRestarts = 10

// ExplainWorkload reports on w with the settings s. It fails only when the
// workload's references cannot be found (a source fails).
func ExplainWorkload(s Settings, w Workload) (WorkloadReport, error) {
	obj := w.Object
	kind, _ := workload.Of(obj)
	rep := WorkloadReport{Kind: kind.Name(), Namespace: obj.GetNamespace(), Name: obj.GetName(), Restarts: restarts(w.Events)}
	origins, err := s.Resolver.Explain(obj, s.configs())
	if err != nil {
		return rep, fmt.Errorf("find the references of %s %s/%s: %w", rep.Kind, rep.Namespace, rep.Name, err)
	}
	g := s.gather(w, origins, &rep.Notes)
	in := g.in
	rep.Record, rep.Uses = g.record, g.uses
	rep.Producers = producers(rep.Uses, w.Producers)
	decidable := g.ok
	if s.HashKeyID == "" {
		decidable = false
		rep.Notes = append(rep.Notes, "hashes not compared: "+s.HashKeyProblem)
	}
	rep.OnDelete = workload.OnDelete(obj)
	rep.ChangeSet = changeSet(obj, &rep.Notes)
	rep.TemplateChangeSet = optin.TemplateChangeSet(optin.Of(obj))
	rep.RecordedChangeSet = obj.GetAnnotations()[optin.RecordedChangeSet]
	rep.Excluded = s.watched(obj)
	rep.Watched = rep.Excluded == ""
	if !decidable {
		rep.Action = ActionUnknown
		rep.Status = status(rep, plan.Plan{})
		return rep, nil
	}
	// The rules after the decision are the controller's chain, run on the
	// facts explain read: what it says is what the controller does.
	p := plan.Decide(in)
	f := s.facts(w, in)
	out := verdict.Apply(f, p)
	rep.Verdict = verdictOf(f, p, out)
	rep.Action, rep.Pending = out.Plan.Action.String(), out.Plan.Action == plan.Restart && rep.Watched
	for _, c := range p.Changes {
		cfg := w.Configs[c.Ref.ID()]
		rep.Changes = append(rep.Changes, Change{Kind: string(c.Ref.Kind), Name: c.Ref.Name, Keys: c.Keys, SealedSecret: cfg.SealedSecret, ChangedBy: cfg.ChangedBy})
	}
	for _, c := range p.Ignored {
		_, rule := in.Rules.Evaluate(in, c.Ref)
		rep.Ignored = append(rep.Ignored, Change{Kind: string(c.Ref.Kind), Name: c.Ref.Name, Keys: c.Keys, Rule: rule})
	}
	for _, m := range p.Missing {
		rep.Missing = append(rep.Missing, Missing{Kind: string(m.Ref.Kind), Name: m.Ref.Name, Keys: m.Keys})
	}
	for i := range rep.Uses {
		rep.Uses[i].Hashes = hashes(in, rep.Uses[i])
		rep.Uses[i].ChangeSet = optin.ChangeSetOf(w.Configs[string(rep.Uses[i].Kind)+"/"+rep.Uses[i].Name].Annotations)
		rep.Uses[i].Pin = pinOf(f, out, rep.Uses[i])
	}
	if said := verdictStatus(f, out); said != "" && rep.Watched {
		rep.Status = said
		return rep, nil
	}
	p.Action = out.Plan.Action
	rep.Status = status(rep, p)
	return rep, nil
}

// gathered is what explain knows of a workload, read as the controller
// reads it (package gather).
type gathered struct {
	// in is the input of plan.Decide.
	in plan.Input
	// record is the state of its record (gather.Recorded.State).
	record string
	// uses describe the references found, in the order of the origins.
	uses []Use
	// ok is false when an object it uses could not be read.
	ok bool
}

// input returns the input of plan.Decide for obj, whose references are
// uses, as the controller starts it (gather.Input).
func (s Settings) input(obj client.Object, uses []refs.Ref) plan.Input {
	o := gather.Options{Rules: s.Rules, RestartOnCreate: s.RestartOnCreate, ReloadOnDelete: s.ReloadOnDelete}
	return gather.Input(o, obj, uses, s.named(obj, uses))
}

// gather builds the input of plan.Decide for w, whose references are
// origins, as the controller builds it (package gather): the objects of
// w.Configs stand for those of the controller's store, and the
// SecretProviderClasses recorded count as unchanged (explain reads no
// SecretProviderClassPodStatus, see package csi). An unreadable record is
// said in notes.
func (s Settings) gather(w Workload, origins []resolve.Origin, notes *[]string) gathered {
	obj := w.Object
	in := s.input(obj, refsOf(origins))
	rec := gather.Record(obj.GetAnnotations(), s.HashKeyID)
	if rec.Err != nil {
		*notes = append(*notes, "unreadable record: "+rec.Err.Error())
	}
	in.Recorded, in.Version = rec.Record, rec.Version
	g := gathered{record: rec.State, ok: true}
	where := paths(obj, origins)
	for _, o := range origins {
		u, cfg, ok := s.use(in, o, w.Configs[o.Ref.ID()], where[o.Ref.ID()])
		g.ok = g.ok && ok
		if !o.Ignored {
			in.Configs[o.Ref.ID()] = cfg
		}
		g.uses = append(g.uses, u)
	}
	gather.Mounted(&in, nil)
	g.in = in
	return g
}

// use describes the reference of origin o to cfg, and returns the object's
// state for plan.Decide; ok is false when it cannot be known.
func (s Settings) use(in plan.Input, o resolve.Origin, cfg Config, where []Path) (Use, plan.Config, bool) {
	r := o.Ref
	u := Use{Kind: string(r.Kind), Name: r.Name, AllKeys: r.AllKeys, Keys: r.Keys, Required: r.Required,
		Optional: r.Optional, Sources: o.Sources, Paths: where, State: StatePresent}
	if u.Paths == nil {
		u.Paths = []Path{}
	}
	pc := plan.Config{Present: cfg.Found, Keys: cfg.Keys, Annotations: cfg.Annotations, Labels: cfg.Labels, Type: cfg.Type, Sum: cfg.Sum}
	ok := true
	switch why := s.configWatched(cfg); {
	case cfg.Unreadable != "":
		u.State, u.StateReason, ok = StateUnreadable, cfg.Unreadable, false
	case !cfg.Found:
		u.State = StateAbsent
	case why != "":
		u.State, u.StateReason, pc = StateNotWatched, why, plan.Config{}
	}
	if o.Ignored {
		u.Verdict, u.Rule = plan.Drop.String(), RuleIgnoredNamespace
		return u, pc, true // never compared: what it holds does not matter
	}
	rin := in
	rin.Configs = map[string]plan.Config{r.ID(): pc}
	v, rule := in.Rules.Evaluate(rin, r)
	u.Verdict, u.Rule = v.String(), rule
	return u, pc, ok
}

// hashes compares the record of u with the object now, key by key, as
// plan.Decide compares them (plan.CompareKeys): the keys the pods read
// that the object has, and those recorded that it lacks now (or that the
// pods no longer read, from an entry that read every key).
func hashes(in plan.Input, u Use) []KeyHash {
	ref := refs.Ref{Kind: refs.Kind(u.Kind), Name: u.Name, AllKeys: u.AllKeys, Keys: u.Keys}
	if u.Verdict == plan.Drop.String() {
		return nil
	}
	cur := in.Configs[ref.ID()]
	if !cur.Present {
		return nil
	}
	old, recorded := in.Recorded[ref.ID()]
	if old != nil && old.Digest != "" {
		return []KeyHash{{Key: "*", Recorded: short(old.Digest), Status: "summarized"}}
	}
	out := []KeyHash{}
	for _, d := range plan.CompareKeys(ref, old, cur.Keys) {
		isNow := d.Read && d.Present
		if !isNow && !(d.InRecord && (d.Read || old.All)) {
			continue
		}
		h := ""
		if isNow {
			h = d.New
		}
		kh := KeyHash{Key: d.Key, Recorded: short(d.Old), Current: short(h)}
		switch {
		case !recorded || (old != nil && !d.InRecord && !old.All):
			kh.Status = "not-recorded"
		case !d.InRecord || d.Old == "":
			kh.Status = "added"
			if !isNow || h == "" {
				kh.Status = "same" // read but absent, then and now
			}
		case !isNow || h == "":
			kh.Status = "removed"
		case d.Old == h:
			kh.Status = "same"
		default:
			kh.Status = "changed"
		}
		out = append(out, kh)
	}
	return out
}

// status says in one sentence what watcher would do with the workload.
func status(rep WorkloadReport, p plan.Plan) string {
	said := cause.Restart{Workload: object.Ref{Kind: rep.Kind, Namespace: rep.Namespace, Name: rep.Name}, OnDelete: rep.OnDelete}
	for _, c := range rep.Changes {
		said.Changes = append(said.Changes, cause.Change{
			Source: object.Ref{Kind: c.Kind, Namespace: rep.Namespace, Name: c.Name}, Keys: c.Keys,
			SealedSecret: c.SealedSecret, ChangedBy: c.ChangedBy,
		})
	}
	switch {
	case !rep.Watched:
		return "not watched: " + rep.Excluded
	case rep.Action == ActionUnknown:
		return "cannot tell whether a restart is pending: " + unknownWhy(rep)
	case len(p.Missing) > 0:
		return "restart held: a key the pods need is missing"
	case p.Action == plan.Restart:
		return said.Sentence(true)
	case p.Action == plan.Adopt && rep.Record == RecordOtherKey:
		return "recorded with another hash key: watcher adopts it again (records the current hashes), no restart"
	case p.Action == plan.Adopt:
		return "not adopted yet: watcher records the current hashes, no restart"
	case p.Action == plan.Forget:
		return "opted out: watcher removes its record and never restarts it"
	case p.Action == plan.Refresh:
		return "up to date: watcher refreshes its record (keys newly read), no restart"
	case len(rep.Uses) == 0:
		return "uses no ConfigMap or Secret: nothing to do"
	case p.Record == nil && rep.Record == RecordAbsent:
		return "nothing to record: every object it uses is absent, dropped or not watched"
	}
	return "up to date: no restart pending"
}

func unknownWhy(rep WorkloadReport) string {
	for _, u := range rep.Uses {
		if u.State == StateUnreadable {
			return u.Kind + " " + u.Name + " is unreadable (" + u.StateReason + ")"
		}
	}
	for _, n := range rep.Notes {
		if strings.HasPrefix(n, "hashes not compared") {
			return n
		}
	}
	return "unknown"
}

// restarts returns the newest MaxRestarts events, newest first.
func restarts(evs []Event) []Event {
	out := slices.Clone(evs)
	slices.SortStableFunc(out, func(a, b Event) int { return b.Time.Compare(a.Time) })
	if out == nil {
		out = []Event{}
	}
	return out[:min(len(out), MaxRestarts)]
}
