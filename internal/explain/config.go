package explain

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/plan"
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
	// read every key.
	NewKey []string `json:"newKey"`
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
	for _, w := range candidates {
		u, ok, err := s.user(cfg, w, rep.State)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			rep.Users = append(rep.Users, u)
			keys = append(keys, u.Keys...)
		}
	}
	slices.SortFunc(rep.Users, func(a, b ConfigUser) int { return strings.Compare(a.Kind+"/"+a.Name, b.Kind+"/"+b.Name) })
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		e := KeyEffect{Key: k, Restarts: []string{}}
		for _, u := range rep.Users {
			if !u.AllKeys && !slices.Contains(u.Keys, k) {
				continue
			}
			switch u.Effect {
			case EffectRestart:
				e.Restarts = append(e.Restarts, u.Kind+"/"+u.Name)
			case EffectOnDelete:
				e.OnDelete = append(e.OnDelete, u.Kind+"/"+u.Name)
			}
		}
		rep.ByKey = append(rep.ByKey, e)
	}
	for _, u := range rep.Users {
		if u.AllKeys && u.Effect == EffectRestart {
			rep.NewKey = append(rep.NewKey, u.Kind+"/"+u.Name)
		}
	}
	for _, err := range errs {
		rep.Notes = append(rep.Notes, err.Error())
	}
	return rep
}

// user describes how w uses cfg, if it does; state is cfg's state.
func (s Settings) user(cfg Config, w Workload, state string) (ConfigUser, bool, error) {
	obj := w.Object
	origins, err := s.Resolver.Explain(obj, s.configs())
	if err != nil {
		return ConfigUser{}, false, fmt.Errorf("find the references of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	i := slices.IndexFunc(origins, func(o resolve.Origin) bool { return o.Ref.ID() == cfg.ID() })
	if i < 0 {
		return ConfigUser{}, false, nil
	}
	kind, _ := workload.Of(obj)
	var notes []string
	in := plan.Input{Rules: s.Rules, Annotations: optin.Of(obj), OptInOnly: kind.Recreate, Controlled: kind.Controlled(obj), Policies: s.named(obj, refsOf(origins))}
	u, _, _ := s.use(in, origins[i], cfg, paths(obj, origins)[cfg.ID()])
	cu := ConfigUser{Kind: kind.Name(), Name: obj.GetName(), AllKeys: u.AllKeys, Keys: u.Keys, Sources: u.Sources,
		Paths: u.Paths, Verdict: u.Verdict, Rule: u.Rule, Effect: EffectNone}
	recState, rec := s.record(obj, &notes)
	entry, inRecord := rec[cfg.ID()]
	switch {
	case s.watched(obj) != "":
		cu.Reason = "the workload is not watched: " + s.watched(obj)
	case u.Verdict == plan.Drop.String():
		cu.Reason = "dropped by rule " + u.Rule
	case u.Verdict == plan.Ignore.String():
		cu.Reason = "ignored by rule " + u.Rule + " (recorded silently)"
	case state == StateNotWatched:
		cu.Reason = "the object is not watched: " + s.configWatched(cfg)
	case recState == RecordAbsent || recState == RecordOtherKey || recState == RecordUnreadable:
		cu.Effect, cu.Reason = EffectRecord, "the workload is not adopted yet: a change is recorded, not restarted"
	case recState == RecordCurrent && !inRecord:
		cu.Effect, cu.Reason = EffectRecord, "the object is not in the workload's record yet: a change is recorded, not restarted"
	case recState == RecordCurrent && entry == nil && !s.RestartOnCreate:
		cu.Effect, cu.Reason = EffectRecord, "the object did not exist when recorded: its creation is recorded, not restarted (--reload-on-create)"
	case workload.OnDelete(obj) != "":
		cu.Effect, cu.Reason = EffectOnDelete, "pods pick up the change only when deleted ("+workload.OnDelete(obj)+")"
	default:
		cu.Effect = EffectRestart
	}
	return cu, true, nil
}
