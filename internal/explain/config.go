package explain

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/watcher-dev/watcher/internal/gather"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/resolve"
	"github.com/watcher-dev/watcher/internal/workload"
)

// The effects of a change of an object on one of its users
// (ConfigUser.Effect).
const (
	EffectRestart  = "restart"   // the workload restarts
	EffectOnDelete = "on-delete" // its template is updated; pods roll when deleted
	EffectRecord   = "record"    // recorded, no restart (not adopted yet, or a new reference)
	EffectNone     = "none"      // nothing: see Reason
)

// ConfigReport is what explain says of a ConfigMap or Secret. Its JSON form
// is stable: fields may be added, never renamed or removed.
type ConfigReport struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// State is present, absent, unreadable or not-watched (as Use.State);
	// StateReason says why for the last two.
	State       string `json:"state"`
	StateReason string `json:"stateReason,omitempty"`
	// Keys are its keys (names only), sorted; empty when unreadable.
	Keys []string `json:"keys"`
	// Users are the workloads that refer to it, sorted by kind and name.
	Users []ConfigUser `json:"users"`
	// ByKey says, for each key (its keys and those users read), which
	// workloads a change of it restarts.
	ByKey []KeyEffect `json:"byKey"`
	// NewKey lists the workloads that adding a key restarts: those that
	// read every key; NewKeyOnDelete, those whose template it updates,
	// pods rolling only when deleted.
	NewKey         []string `json:"newKey"`
	NewKeyOnDelete []string `json:"newKeyOnDelete,omitempty"`
	// Notes are remarks: what could not be read.
	Notes []string `json:"notes,omitempty"`
}

// ConfigUser is one workload that refers to the object.
type ConfigUser struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// AllKeys, Keys, Sources and Paths: how it refers to the object, as in
	// Use.
	AllKeys bool     `json:"allKeys"`
	Keys    []string `json:"keys,omitempty"`
	Sources []string `json:"sources"`
	Paths   []Path   `json:"paths"`
	// Verdict and Rule: as in Use.
	Verdict string `json:"verdict"`
	Rule    string `json:"rule,omitempty"`
	// Effect is what a change of a key it reads does: restart,
	// on-delete, record or none; Reason says why, for all but restart.
	Effect string `json:"effect"`
	Reason string `json:"reason,omitempty"`
}

// KeyEffect is what a change of one key does.
type KeyEffect struct {
	Key string `json:"key"`
	// Restarts are the workloads it restarts ("Kind/name"); OnDelete, those
	// whose template it updates, pods rolling only when deleted.
	Restarts []string `json:"restarts"`
	OnDelete []string `json:"onDelete,omitempty"`
}

// ExplainConfig reports on the object cfg, with candidates the workloads of
// its namespace (those that do not refer to it are left out).
func ExplainConfig(s Settings, cfg Config, candidates []Workload) ConfigReport {
	rep := ConfigReport{Kind: string(cfg.Kind), Namespace: cfg.Namespace, Name: cfg.Name, State: StatePresent,
		Keys: slices.Sorted(maps.Keys(cfg.Keys)), Users: []ConfigUser{}, ByKey: []KeyEffect{}, NewKey: []string{}}
	switch why := s.configWatched(cfg); {
	case cfg.Unreadable != "":
		rep.State, rep.StateReason = StateUnreadable, cfg.Unreadable
		rep.Notes = append(rep.Notes, "keys unknown: "+cfg.Unreadable)
	case !cfg.Found:
		rep.State = StateAbsent
	case why != "":
		rep.State, rep.StateReason = StateNotWatched, why
	}
	if rep.Keys == nil {
		rep.Keys = []string{}
	}
	var errs []error
	keys := slices.Clone(rep.Keys)
	var users []user
	for _, w := range candidates {
		u, ok, err := s.user(cfg, w, rep.State)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			users = append(users, u)
			keys = append(keys, u.Keys...)
		}
	}
	slices.SortFunc(users, func(a, b user) int { return strings.Compare(a.Kind+"/"+a.Name, b.Kind+"/"+b.Name) })
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		e := KeyEffect{Key: k, Restarts: []string{}}
		for _, u := range users {
			switch u.change([]string{k}) {
			case EffectRestart:
				e.Restarts = append(e.Restarts, u.Kind+"/"+u.Name)
			case EffectOnDelete:
				e.OnDelete = append(e.OnDelete, u.Kind+"/"+u.Name)
			}
		}
		rep.ByKey = append(rep.ByKey, e)
	}
	for _, u := range users {
		rep.Users = append(rep.Users, u.ConfigUser)
		if !u.AllKeys {
			continue
		}
		switch u.change([]string{newKey}) {
		case EffectRestart:
			rep.NewKey = append(rep.NewKey, u.Kind+"/"+u.Name)
		case EffectOnDelete:
			rep.NewKeyOnDelete = append(rep.NewKeyOnDelete, u.Kind+"/"+u.Name)
		}
	}
	for _, err := range errs {
		rep.Notes = append(rep.Notes, err.Error())
	}
	return rep
}

// newKey names a key that no ConfigMap or Secret has (a key is made of
// letters, digits, "-", "_" and "."), for what adding a key does.
const newKey = "(a new key)"

// user is one workload that refers to the object explained, and what a
// change of some of the object's keys does to it.
type user struct {
	ConfigUser
	// change returns the effect of a change of keys: EffectRestart,
	// EffectOnDelete, or "" for neither.
	change func(keys []string) string
}

// user describes how w uses cfg, if it does; state is cfg's state. What a
// change does is plan.Decide's answer on the workload's input, gathered
// as the controller gathers it, with cfg's keys changed (gather.Change):
// the controller's decision once the change comes.
func (s Settings) user(cfg Config, w Workload, state string) (user, bool, error) {
	obj := w.Object
	origins, err := s.Resolver.Explain(obj, s.configs())
	if err != nil {
		return user{}, false, fmt.Errorf("find the references of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	i := slices.IndexFunc(origins, func(o resolve.Origin) bool { return o.Ref.ID() == cfg.ID() })
	if i < 0 {
		return user{}, false, nil
	}
	kind, _ := workload.Of(obj)
	var notes []string
	configs := maps.Clone(w.Configs)
	if configs == nil {
		configs = map[string]Config{}
	}
	configs[cfg.ID()] = cfg
	g := s.gather(Workload{Object: obj, Configs: configs}, origins, &notes)
	u, ref := g.uses[i], origins[i].Ref
	cu := user{ConfigUser: ConfigUser{Kind: kind.Name(), Name: obj.GetName(), AllKeys: u.AllKeys, Keys: u.Keys, Sources: u.Sources,
		Paths: u.Paths, Verdict: u.Verdict, Rule: u.Rule, Effect: EffectNone}}
	onDelete := workload.OnDelete(obj)
	cu.change = func(keys []string) string {
		if s.watched(obj) != "" || state == StateNotWatched || origins[i].Ignored {
			return ""
		}
		if e, _ := effect(g, ref, keys, onDelete); e == EffectRestart || e == EffectOnDelete {
			return e
		}
		return ""
	}
	switch {
	case s.watched(obj) != "":
		cu.Reason = "the workload is not watched: " + s.watched(obj)
	case u.Verdict == plan.Drop.String():
		cu.Reason = "dropped by rule " + u.Rule
	case u.Verdict == plan.Ignore.String():
		cu.Reason = "ignored by rule " + u.Rule + " (recorded silently)"
	case state == StateNotWatched:
		cu.Reason = "the object is not watched: " + s.configWatched(cfg)
	default:
		cu.Effect, cu.Reason = effect(g, ref, read(ref, cfg), onDelete)
	}
	return cu, true, nil
}

// read returns the keys of cfg that ref reads: those it names, or every
// key of cfg (a new one when it has none).
func read(ref refs.Ref, cfg Config) []string {
	if !ref.AllKeys {
		return ref.Keys
	}
	if len(cfg.Keys) == 0 {
		return []string{newKey}
	}
	return slices.Sorted(maps.Keys(cfg.Keys))
}

// effect says what a change of keys of the object of ref does to the
// workload gathered as g, whose pods roll only when deleted if onDelete
// says why: plan.Decide on the changed hashes.
//
//	the decision                          effect     reason
//	restart, for one of keys              restart
//	  (pods roll only when deleted)       on-delete  why
//	none: a key the pods need is missing  none       restart held
//	adopt                                 record     not adopted yet
//	refresh: the object not recorded      record     not in the record yet
//	refresh: recorded as absent           record     did not exist when recorded
//	anything else                         none       plan.Plan.SkipReason
func effect(g gathered, ref refs.Ref, keys []string, onDelete string) (effect, reason string) {
	in := gather.Change(g.in, ref, keys)
	p := plan.Decide(in)
	entry, recorded := g.in.Recorded[ref.ID()]
	switch {
	case gather.Restarts(p, ref, keys) && onDelete != "":
		return EffectOnDelete, "pods pick up the change only when deleted (" + onDelete + ")"
	case gather.Restarts(p, ref, keys):
		return EffectRestart, ""
	case len(p.Missing) > 0:
		return EffectNone, "restart held: a key the pods need is missing"
	case p.Action == plan.Adopt:
		return EffectRecord, "the workload is not adopted yet: a change is recorded, not restarted"
	case p.Action == plan.Refresh && !recorded:
		return EffectRecord, "the object is not in the workload's record yet: a change is recorded, not restarted"
	case p.Action == plan.Refresh && entry == nil:
		return EffectRecord, "the object did not exist when recorded: its creation is recorded, not restarted (--reload-on-create)"
	}
	return EffectNone, p.SkipReason(in)
}
