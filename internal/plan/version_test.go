package plan_test

import (
	"strings"
	"testing"

	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
)

func at(version string, kv ...string) plan.Config {
	c := present(kv...)
	c.Version = version
	return c
}

func TestDecideVersion(t *testing.T) {
	two := []refs.Ref{cmAll("a"), cmAll("b")}
	tests := []struct {
		name     string
		refs     []refs.Ref
		recorded plan.Record
		configs  map[string]plan.Config
		want     string
	}{
		{"adopted: the newest of the objects", two, nil,
			map[string]plan.Config{cmA: at("90", "k", "1"), cmB: at("120", "k", "1")}, "120"},
		{"compared as numbers, not text", two, nil,
			map[string]plan.Config{cmA: at("9", "k", "1"), cmB: at("10", "k", "1")}, "10"},
		{"restarted: the changed object's version", two, plan.Record{cmA: all("k", "1"), cmB: all("k", "1")},
			map[string]plan.Config{cmA: at("90", "k", "1"), cmB: at("300", "k", "2")}, "300"},
		{"an object absent from the store: not known", two, plan.Record{cmA: all("k", "1"), cmB: all("k", "1")},
			map[string]plan.Config{cmA: at("300", "k", "2")}, ""},
		{"a version that is no resourceVersion: not known", two, nil,
			map[string]plan.Config{cmA: at("90", "k", "1"), cmB: at("x1", "k", "1")}, ""},
		{"an opted-out object is recorded: its version counts", []refs.Ref{cmAll("a"), secAll("a")}, nil,
			map[string]plan.Config{cmA: at("90", "k", "1"), secA: {Present: true, Keys: map[string]string{"k": "1"}, Annotations: optedOutAnnotations, Version: "500"}}, "500"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := plan.Decide(plan.Input{Rules: rules, Refs: tt.refs, Recorded: tt.recorded, Configs: tt.configs})
			if p.Record == nil {
				t.Fatalf("nothing to record: %+v", p)
			}
			if p.Version != tt.want {
				t.Errorf("version %q, want %q", p.Version, tt.want)
			}
		})
	}
	t.Run("nothing to write, no version", func(t *testing.T) {
		p := plan.Decide(plan.Input{Rules: rules, Refs: []refs.Ref{cmAll("a")}, Recorded: plan.Record{cmA: all("k", "1")},
			Configs: map[string]plan.Config{cmA: at("90", "k", "1")}})
		if p.Action != plan.None || p.Version != "" {
			t.Errorf("plan %+v, want none without version", p)
		}
	})
}

func TestStoreMayLag(t *testing.T) {
	recorded := plan.Record{cmA: all("k", "1"), cmB: all("k", "1")}
	two := []refs.Ref{cmAll("a"), cmAll("b")}
	tests := []struct {
		name    string
		version string // the record's
		configs map[string]plan.Config
		want    bool
	}{
		{"the change is newer than the record", "200", map[string]plan.Config{cmA: at("90", "k", "1"), cmB: at("300", "k", "2")}, false},
		{"the change is the record's newest object", "300", map[string]plan.Config{cmA: at("90", "k", "1"), cmB: at("300", "k", "2")}, false},
		{"the record is newer than the change: another replica saw more", "400", map[string]plan.Config{cmA: at("90", "k", "1"), cmB: at("300", "k", "2")}, true},
		{"the record's version is not known", "", map[string]plan.Config{cmA: at("90", "k", "1"), cmB: at("300", "k", "2")}, true},
		{"the changed object has no version", "200", map[string]plan.Config{cmA: at("90", "k", "1"), cmB: present("k", "2")}, true},
		{"compared as numbers: 1000 is newer than 999", "999", map[string]plan.Config{cmA: at("90", "k", "1"), cmB: at("1000", "k", "2")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := plan.Input{Rules: rules, Refs: two, Recorded: recorded, Version: tt.version, Configs: tt.configs}
			p := plan.Decide(in)
			if p.Action != plan.Restart {
				t.Fatalf("action %v, want restart", p.Action)
			}
			if got := plan.StoreMayLag(in, p); got != tt.want {
				t.Errorf("StoreMayLag = %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("an optional object deleted in the store", func(t *testing.T) {
		in := plan.Input{Rules: rules, Refs: []refs.Ref{optionalAll("a")}, Recorded: plan.Record{cmA: all("k", "1")}, Version: "100",
			Configs: map[string]plan.Config{}, ReloadOnDelete: true}
		p := plan.Decide(in)
		if p.Action != plan.Restart || !plan.StoreMayLag(in, p) {
			t.Errorf("plan %v, StoreMayLag %v; want a restart read again", p.Action, plan.StoreMayLag(in, p))
		}
	})
	t.Run("no restart, nothing to read", func(t *testing.T) {
		in := plan.Input{Rules: rules, Refs: two, Recorded: recorded, Configs: map[string]plan.Config{cmA: at("1", "k", "1"), cmB: at("2", "k", "1")}}
		if plan.StoreMayLag(in, plan.Decide(in)) {
			t.Error("StoreMayLag for a workload up to date")
		}
	})
}

func TestParseVersion(t *testing.T) {
	r := plan.Record{cmA: all("k", "1")}
	other := plan.Record{cmA: all("k", "2")}
	good := plan.FormatVersion(r, "12345").(string)
	tests := []struct {
		name, value string
		record      plan.Record
		want        string
	}{
		{"written with the record", good, r, "12345"},
		{"the record changed since", good, other, ""},
		{"no record", good, nil, ""},
		{"no id", "12345", r, ""},
		{"not a resourceVersion", "12a/" + r.RestartID(), r, ""},
		{"leading zero", "012/" + r.RestartID(), r, ""},
		{"too long", strings.Repeat("9", 64) + "/" + r.RestartID(), r, ""},
		{"empty", "", r, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := plan.ParseVersion(tt.value, tt.record); got != tt.want {
				t.Errorf("ParseVersion(%q) = %q, want %q", tt.value, got, tt.want)
			}
		})
	}
	if v := plan.FormatVersion(r, ""); v != nil {
		t.Errorf("FormatVersion without a version = %v, want nil (removed)", v)
	}
}
