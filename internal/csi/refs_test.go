package csi

import (
	"reflect"
	"testing"

	"github.com/watcher-dev/watcher/internal/plan"
)

func TestRefs(t *testing.T) {
	reload := map[string]string{"secretproviderclass.reloader.stakater.com/reload": "db,cache"}
	auto := map[string]string{"reloader.stakater.com/auto": "true"}
	now := map[string]map[string]string{"db": {"pw": "h2"}}
	rec := plan.Record{"SecretProviderClass/db": {All: true, Keys: map[string]string{"pw": "h1"}}}
	tests := []struct {
		name    string
		mounted map[string]map[string]string
		rec     plan.Record
		ann     map[string]string
		want    map[string]map[string]string // class → keys given
	}{
		{"mounted, named", now, nil, reload, map[string]map[string]string{"db": {"pw": "h2"}}},
		{"mounted, auto", now, nil, auto, map[string]map[string]string{"db": {"pw": "h2"}}},
		{"mounted, typed auto", now, nil, map[string]string{"secretproviderclass.reloader.stakater.com/auto": "true"}, map[string]map[string]string{"db": {"pw": "h2"}}},
		{"mounted, template opts in", now, nil, map[string]string{"watcher.dev/cached/template/secretproviderclass.reloader.stakater.com/reload": "db"}, map[string]map[string]string{"db": {"pw": "h2"}}},
		{"mounted, not opted in", now, nil, map[string]string{"secret.reloader.stakater.com/auto": "true"}, nil},
		{"mounted, another class named", now, nil, map[string]string{"secretproviderclass.reloader.stakater.com/reload": "cache"}, nil},
		{"mounted, auto off", now, nil, map[string]string{"reloader.stakater.com/auto": "false"}, nil},
		{"known wins over the record", now, rec, reload, map[string]map[string]string{"db": {"pw": "h2"}}},
		{"not known now: as recorded", nil, rec, reload, map[string]map[string]string{"db": {"pw": "h1"}}},
		{"recorded, opted out", nil, rec, nil, nil},
		{"recorded as a digest", nil, plan.Record{"SecretProviderClass/db": {All: true, Digest: "abc"}}, reload, nil},
		{"ConfigMaps of the record are not classes", nil, plan.Record{"ConfigMap/db": {Keys: map[string]string{"a": "1"}}}, reload, nil},
	}
	for _, tt := range tests {
		refs, configs := Refs(tt.mounted, tt.rec, tt.ann)
		got := map[string]map[string]string{}
		for _, r := range refs {
			c := configs[r.ID()]
			if !r.AllKeys || !r.Optional || !c.Present || r.ID() != "SecretProviderClass/"+r.Name {
				t.Errorf("%s: reference %+v, config %+v", tt.name, r, c)
			}
			got[r.Name] = c.Keys
		}
		if len(got) == 0 {
			got = nil
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestRefsDecide: what plan.Decide makes of the references, row by row of
// the package comment: the first versions are adopted, the same restart
// nothing, others restart once for the objects that differ.
func TestRefsDecide(t *testing.T) {
	ann := map[string]string{"secretproviderclass.reloader.stakater.com/reload": "db"}
	decide := func(mounted map[string]map[string]string, rec plan.Record) plan.Plan {
		refs, configs := Refs(mounted, rec, ann)
		return plan.Decide(plan.Input{Annotations: ann, Refs: refs, Configs: configs, Recorded: rec})
	}
	v1 := map[string]map[string]string{"db": {"pw": vh("pw", "1"), "user": vh("user", "1")}}
	v2 := map[string]map[string]string{"db": {"pw": vh("pw", "2"), "user": vh("user", "1")}}
	adopt := decide(v1, nil)
	if adopt.Action != plan.Adopt {
		t.Fatalf("first sight: %s, want adopt", adopt.Action)
	}
	if p := decide(v1, adopt.Record); p.Action != plan.None {
		t.Errorf("same versions: %s, want none", p.Action)
	}
	if p := decide(nil, adopt.Record); p.Action != plan.None {
		t.Errorf("versions unknown: %s, want none", p.Action)
	}
	p := decide(v2, adopt.Record)
	if p.Action != plan.Restart || len(p.Changes) != 1 || !reflect.DeepEqual(p.Changes[0].Keys, []string{"pw"}) {
		t.Fatalf("rotation: %s %+v, want a restart for pw", p.Action, p.Changes)
	}
	if again := decide(v2, p.Record); again.Action != plan.None {
		t.Errorf("the rotation again (another pod's status): %s, want none", again.Action)
	}
}
