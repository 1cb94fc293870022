package verdict

import (
	"fmt"
	"testing"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
)

var (
	cfgRef = refs.Ref{Kind: refs.ConfigMap, Name: "cfg", AllKeys: true}
	cfgSrc = pin.Source{Kind: pin.ConfigMap, Name: "cfg"}
	v1     = "cfg-pin-11111111111111111111"
	v2     = "cfg-pin-22222222222222222222"
	rec    = plan.Record{"ConfigMap/cfg": &plan.Entry{All: true}}
)

func restartFor(refs ...refs.Ref) plan.Plan {
	p := plan.Plan{Action: plan.Restart, Record: rec}
	for _, r := range refs {
		p.Changes = append(p.Changes, plan.Change{Ref: r})
	}
	return p
}

// facts is a pinned Deployment reading cfg (now at v2), its template
// pinning v1 as watcher wrote it.
func facts(mod func(*Facts)) Facts {
	f := Facts{Annotations: map[string]string{}, Recorded: rec,
		Sources: map[string]Source{"ConfigMap/cfg": {Present: true, Version: "5", Snapshot: v2, PodSpec: true}},
		Pin:     Pinning{On: true, Wanted: true, Template: pin.Pins{cfgSrc: v1}, Revision: pin.Pins{cfgSrc: v1}.Digest()}}
	if mod != nil {
		mod(&f)
	}
	return f
}

func TestApply(t *testing.T) {
	tests := []struct {
		name      string
		f         Facts
		p         plan.Plan
		action    plan.Action
		rule      string
		writePins bool
		pins      []pin.Source
		template  bool
		stale     bool
	}{
		{"a change of a pinned workload pins its sources", facts(nil), restartFor(cfgRef),
			plan.Restart, "", true, []pin.Source{cfgSrc}, false, false},
		{"not pinned: nothing of pins", facts(func(f *Facts) { f.Pin = Pinning{On: true} }), restartFor(cfgRef),
			plan.Restart, "", false, nil, false, false},
		{"no longer wanted: the restart removes the pins", facts(func(f *Facts) { f.Pin.Wanted = false }), restartFor(cfgRef),
			plan.Restart, "", true, nil, false, false},
		{"pinning off: a restart removes the pins left", facts(func(f *Facts) { f.Pin.On = false }), restartFor(cfgRef),
			plan.Restart, "", true, nil, false, false},
		{"pinning off, no restart: the template is left as it is", facts(func(f *Facts) { f.Pin.On = false }), plan.Plan{},
			plan.None, "", false, nil, false, false},
		{"pins older than the live content with no change (a release kept them while pinning was off): pinned again", facts(nil), plan.Plan{},
			plan.Restart, RuleRepin, true, []pin.Source{cfgSrc}, false, false},
		{"pins older than the live content left by a rollback: not pinned again", facts(func(f *Facts) { f.Pin.From = pin.Pins{cfgSrc: v2} }), plan.Plan{},
			plan.None, "", false, nil, false, false},
		{"evict, pins naming a snapshot that is gone: removed by writing the template once", facts(func(f *Facts) {
			f.Pin.Evicts, f.Pin.Missing = true, []string{"configmap " + v1}
			f.Pin.Template = pin.Pins{cfgSrc: v2}
		}), plan.Plan{}, plan.Restart, RuleRepin, true, nil, true, false},
		{"evict, pins older than the live content: removed by writing the template once", facts(func(f *Facts) { f.Pin.Evicts = true }), plan.Plan{},
			plan.Restart, RuleRepin, true, nil, true, false},
		{"a release changing a pinned source that floats now: refreshed, its pin removed, no restart", facts(func(f *Facts) {
			f.Annotations = withTemplateID(map[string]string{optin.RecordedChangeSet: "7"}, "8")
			s := f.Sources["ConfigMap/cfg"]
			s.ChangeSet, s.Floats = "8", "opted out"
			f.Sources["ConfigMap/cfg"] = s
		}), plan.Plan{Action: plan.Refresh, Record: rec, Ignored: []plan.Change{{Ref: cfgRef}}}, plan.Refresh, RuleInRelease, true, nil, false, false},
		{"a native rollback is recorded, nothing restarts", facts(func(f *Facts) { f.Pin.Revision = pin.Pins{cfgSrc: v2}.Digest() }), plan.Plan{},
			plan.None, RuleRolledBack, false, nil, false, false},
		{"a rollback whose snapshot is gone is pinned again", facts(func(f *Facts) {
			f.Pin.Revision, f.Pin.Missing = pin.Pins{cfgSrc: v2}.Digest(), []string{"configmap " + v1}
		}), plan.Plan{}, plan.Restart, RuleRepin, true, []pin.Source{cfgSrc}, false, false},
		{"current pins naming a snapshot that is gone are pinned again", facts(func(f *Facts) { f.Pin.Missing = []string{"configmap " + v1} }),
			plan.Plan{}, plan.Restart, RuleRepin, true, []pin.Source{cfgSrc}, false, false},
		{"stripped pins are pinned again", facts(func(f *Facts) { f.Pin.Template = nil }), plan.Plan{},
			plan.Restart, RuleRepin, true, []pin.Source{cfgSrc}, false, false},
		{"pins and label replaced, a pinned revision exists: pinned again", facts(func(f *Facts) {
			f.Pin.Template, f.Pin.Revision, f.Pin.PinnedBefore = nil, "", true
		}), plan.Plan{}, plan.Restart, RuleRepin, true, []pin.Source{cfgSrc}, false, false},
		{"never pinned: pinned at its next restart, not now", facts(func(f *Facts) { f.Pin.Template, f.Pin.Revision = nil, "" }), plan.Plan{},
			plan.None, "", false, nil, false, false},
		{"only the content a rollback left: not made, stale", facts(func(f *Facts) { f.Pin.From = pin.Pins{cfgSrc: v2} }), restartFor(cfgRef),
			plan.None, RuleLeftByRollback, false, nil, false, true},
		{"another content than the rollback left rolls", facts(func(f *Facts) {
			f.Pin.From = pin.Pins{cfgSrc: "cfg-pin-33333333333333333333"}
		}), restartFor(cfgRef), plan.Restart, "", true, []pin.Source{cfgSrc}, false, false},
		{"a source opted out floats", facts(func(f *Facts) {
			s := f.Sources["ConfigMap/cfg"]
			s.Floats = "opted out"
			f.Sources["ConfigMap/cfg"] = s
			f.Sources["ConfigMap/other"] = Source{Present: true, Snapshot: "other-pin-1", PodSpec: true}
			f.Pin.Template = nil
			f.Pin.Revision = ""
		}), restartFor(refs.Ref{Kind: refs.ConfigMap, Name: "other"}), plan.Restart, "", true, []pin.Source{{Kind: pin.ConfigMap, Name: "other"}}, false, false},
		{"a pinned source that floats now and changed is unpinned by a restart", facts(func(f *Facts) {
			s := f.Sources["ConfigMap/cfg"]
			s.Floats = "opted out"
			f.Sources["ConfigMap/cfg"] = s
		}), plan.Plan{Action: plan.Refresh, Record: rec, Ignored: []plan.Change{{Ref: cfgRef}}}, plan.Restart, RuleRepin, true, nil, false, false},
		{"a source that floats now, pinned at an older content, no change (it changed while pinning was off): its pin removed", facts(func(f *Facts) {
			s := f.Sources["ConfigMap/cfg"]
			s.Floats = "opted out"
			f.Sources["ConfigMap/cfg"] = s
		}), plan.Plan{}, plan.Restart, RuleRepin, true, nil, false, false},
		{"a snapshot and a reload-list source are never pinned", facts(func(f *Facts) {
			f.Sources["ConfigMap/cfg-pin-1"] = Source{Present: true, IsSnapshot: true, PodSpec: true}
			f.Sources["ConfigMap/listed"] = Source{Present: true}
		}), restartFor(cfgRef), plan.Restart, "", true, []pin.Source{cfgSrc}, false, false},
		{"evict with pins left: the restart writes the template to remove them", facts(func(f *Facts) { f.Pin.Evicts = true }), restartFor(cfgRef),
			plan.Restart, "", true, nil, true, false},
		{"evict, never pinned: evicts as usual", facts(func(f *Facts) { f.Pin.Evicts, f.Pin.Template = true, nil }), restartFor(cfgRef),
			plan.Restart, "", false, nil, false, false},
		{"a release without ids whose template was written after the change: recorded, no rollout", facts(func(f *Facts) {
			f.Pin, f.Released = Pinning{On: true}, "9"
		}), restartFor(cfgRef), plan.Refresh, RuleReleased, false, nil, false, false},
		{"a release without ids whose rollout is not done: nothing yet, stale", facts(func(f *Facts) {
			f.Pin, f.Released, f.Rolling = Pinning{On: true}, "9", true
		}), restartFor(cfgRef), plan.None, RuleReleasing, false, nil, false, true},
		{"a source written after the template restarts", facts(func(f *Facts) { f.Pin, f.Released = Pinning{On: true}, "4" }),
			restartFor(cfgRef), plan.Restart, "", false, nil, false, false},
		{"written at the template's own version cannot be told: restarts", facts(func(f *Facts) { f.Pin, f.Released = Pinning{On: true}, "5" }),
			restartFor(cfgRef), plan.Restart, "", false, nil, false, false},
		{"a template change not seen made (a new process): restarts", facts(func(f *Facts) { f.Pin = Pinning{On: true} }),
			restartFor(cfgRef), plan.Restart, "", false, nil, false, false},
		{"a source the template pins: its rollout reads the old snapshot, restarts to pin", facts(func(f *Facts) { f.Released = "9" }),
			restartFor(cfgRef), plan.Restart, "", true, []pin.Source{cfgSrc}, false, false},
		{"a source gone restarts", facts(func(f *Facts) {
			f.Pin, f.Released = Pinning{On: true}, "9"
			f.Sources["ConfigMap/cfg"] = Source{Version: "5", PodSpec: true}
		}), restartFor(cfgRef), plan.Restart, "", false, nil, false, false},
		{"a release carries the change and repins the template", facts(func(f *Facts) {
			f.Annotations = withTemplateID(map[string]string{optin.RecordedChangeSet: "7"}, "8")
			s := f.Sources["ConfigMap/cfg"]
			s.ChangeSet = "8"
			f.Sources["ConfigMap/cfg"] = s
		}), restartFor(cfgRef), plan.Refresh, RuleInRelease, true, []pin.Source{cfgSrc}, false, false},
		{"a release whose template pins the content already writes no pins", facts(func(f *Facts) {
			f.Annotations = withTemplateID(map[string]string{optin.RecordedChangeSet: "7"}, "8")
			s := f.Sources["ConfigMap/cfg"]
			s.ChangeSet = "8"
			f.Sources["ConfigMap/cfg"] = s
			f.Pin.Template = pin.Pins{cfgSrc: v2}
			f.Pin.Revision = f.Pin.Template.Digest()
		}), restartFor(cfgRef), plan.Refresh, RuleInRelease, false, nil, false, false},
		{"a change without the release's id restarts", facts(func(f *Facts) {
			f.Annotations = withTemplateID(map[string]string{optin.RecordedChangeSet: "7"}, "8")
		}), restartFor(cfgRef), plan.Restart, "", true, []pin.Source{cfgSrc}, false, false},
		{"a hand edit after the release was seen restarts", facts(func(f *Facts) {
			f.Annotations = withTemplateID(map[string]string{optin.RecordedChangeSet: "8"}, "8")
			s := f.Sources["ConfigMap/cfg"]
			s.ChangeSet = "8"
			f.Sources["ConfigMap/cfg"] = s
		}), restartFor(cfgRef), plan.Restart, "", true, []pin.Source{cfgSrc}, false, false},
		{"an image-only release is recorded as seen", facts(func(f *Facts) {
			f.Annotations = withTemplateID(map[string]string{optin.RecordedChangeSet: "7"}, "8")
			f.Pin.Template = pin.Pins{cfgSrc: v2}
			f.Pin.Revision = f.Pin.Template.Digest()
		}), plan.Plan{}, plan.Refresh, RuleChangeSetSeen, false, nil, false, false},
		{"too many sources pin nothing", facts(func(f *Facts) {
			for i := range pin.MaxPins {
				f.Sources[fmt.Sprintf("ConfigMap/c%03d", i)] = Source{Present: true, PodSpec: true}
			}
		}), restartFor(cfgRef), plan.Restart, "", true, nil, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := Apply(tt.f, tt.p)
			if out.Plan.Action != tt.action || out.Rule != tt.rule || out.WritePins != tt.writePins || out.Template != tt.template || out.Stale != tt.stale {
				t.Errorf("Apply = action %v rule %q writePins %v template %v stale %v; want %v %q %v %v %v",
					out.Plan.Action, out.Rule, out.WritePins, out.Template, out.Stale, tt.action, tt.rule, tt.writePins, tt.template, tt.stale)
			}
			if len(out.Pins) != len(tt.pins) {
				t.Fatalf("pins %v, want %v", out.Pins, tt.pins)
			}
			for i := range tt.pins {
				if out.Pins[i] != tt.pins[i] {
					t.Errorf("pins %v, want %v", out.Pins, tt.pins)
				}
			}
			if out.Plan.Action != plan.None && out.Plan.Action != plan.Forget && out.Plan.Record == nil {
				t.Errorf("a %v with no record to write", out.Plan.Action)
			}
		})
	}
}

// withTemplateID sets the pod template's change-set id in ann, as
// optin.Of reports it (under its prefix for the template's annotations).
func withTemplateID(ann map[string]string, id string) map[string]string {
	ann["watcher.dev/cached/template/"+optin.ChangeSet] = id
	if optin.TemplateChangeSet(ann) != id {
		panic("optin's prefix for the template's annotations changed")
	}
	return ann
}
