package plan_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
)

// IDs of the references used below.
const (
	cmA  = "ConfigMap/a"
	cmB  = "ConfigMap/b"
	secA = "Secret/a"
)

func cm(name string, keys ...string) refs.Ref {
	return refs.Ref{Kind: refs.ConfigMap, Name: name, Keys: keys}
}

func cmAll(name string) refs.Ref { return refs.Ref{Kind: refs.ConfigMap, Name: name, AllKeys: true} }

// optionalAll is a reference reading every key of ConfigMap name that pods
// can start without (envFrom or a volume marked optional).
func optionalAll(name string) refs.Ref {
	r := cmAll(name)
	r.Optional = true
	return r
}

func secAll(name string) refs.Ref { return refs.Ref{Kind: refs.Secret, Name: name, AllKeys: true} }

// entry builds the Entry of a reference that reads some keys, from key,
// hash, key, hash... ("" for a key read but absent).
func entry(kv ...string) *plan.Entry {
	e := &plan.Entry{Keys: map[string]string{}}
	for i := 0; i < len(kv); i += 2 {
		e.Keys[kv[i]] = kv[i+1]
	}
	return e
}

// all builds the Entry of a reference that reads every key.
func all(kv ...string) *plan.Entry {
	e := entry(kv...)
	e.All = true
	return e
}

// required returns a reference to ConfigMap name that reads keys and needs
// need.
func required(name string, keys []string, need ...string) refs.Ref {
	r := cm(name, keys...)
	r.Required = need
	return r
}

func present(kv ...string) plan.Config {
	return plan.Config{Present: true, Keys: entry(kv...).Keys}
}

// optOut is the opt-out annotation of the rules the tests decide with.
const optOut = "require-restart"

// rules are the rules every Input is decided with.
var rules = plan.NewChain(plan.Options{OptOutAnnotation: optOut})

// optedOutAnnotations are the annotations of an object that opted out.
var optedOutAnnotations = map[string]string{optOut: "false"}

func optedOut(kv ...string) plan.Config {
	c := present(kv...)
	c.Annotations = optedOutAnnotations
	return c
}

var missing = plan.Config{}

func change(ref refs.Ref, keys []string, old, cur *plan.Entry) plan.Change {
	return plan.Change{Ref: ref, Keys: keys, Old: old.Sum(), New: cur.Sum()}
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name string
		in   plan.Input
		want plan.Plan
	}{
		// The per-reference table, one case per row (and variants).
		{
			name: "present, no entry (new reference): adopted, no change",
			in:   plan.Input{Refs: []refs.Ref{cm("a", "k")}, Recorded: plan.Record{}, Configs: map[string]plan.Config{cmA: present("k", "1")}},
			want: plan.Plan{Action: plan.Refresh, Record: plan.Record{cmA: entry("k", "1")}},
		},
		{
			name: "present, nil entry, no RestartOnCreate: recorded, no change",
			in:   plan.Input{Refs: []refs.Ref{cm("a", "k")}, Recorded: plan.Record{cmA: nil}, Configs: map[string]plan.Config{cmA: present("k", "1")}},
			want: plan.Plan{Action: plan.Refresh, Record: plan.Record{cmA: entry("k", "1")}},
		},
		{
			name: "present, nil entry, RestartOnCreate: restart",
			in: plan.Input{
				Refs: []refs.Ref{cm("a", "k")}, Recorded: plan.Record{cmA: nil},
				Configs: map[string]plan.Config{cmA: present("k", "1")}, RestartOnCreate: true,
			},
			want: plan.Plan{
				Action: plan.Restart, Record: plan.Record{cmA: entry("k", "1")},
				Changes: []plan.Change{change(cm("a", "k"), []string{"k"}, nil, entry("k", "1"))},
			},
		},
		{
			name: "present, nil entry, RestartOnCreate, created without the key read: no change",
			in: plan.Input{
				Refs: []refs.Ref{cm("a", "k")}, Recorded: plan.Record{cmA: nil},
				Configs: map[string]plan.Config{cmA: present("other", "1")}, RestartOnCreate: true,
			},
			want: plan.Plan{Action: plan.Refresh, Record: plan.Record{cmA: entry("k", "")}},
		},
		{
			name: "present, same hashes: none",
			in:   plan.Input{Refs: []refs.Ref{cmAll("a")}, Recorded: plan.Record{cmA: all("k", "1")}, Configs: map[string]plan.Config{cmA: present("k", "1")}},
			want: plan.Plan{Action: plan.None},
		},
		{
			name: "present, other hashes: restart for the keys that differ",
			in: plan.Input{
				Refs: []refs.Ref{cmAll("a")}, Recorded: plan.Record{cmA: all("k", "1", "l", "1")},
				Configs: map[string]plan.Config{cmA: present("k", "2", "l", "1")},
			},
			want: plan.Plan{
				Action: plan.Restart, Record: plan.Record{cmA: all("k", "2", "l", "1")},
				Changes: []plan.Change{change(cmAll("a"), []string{"k"}, all("k", "1", "l", "1"), all("k", "2", "l", "1"))},
			},
		},
		{
			name: "present, opted out, other hashes: recorded silently, listed as ignored",
			in:   plan.Input{Refs: []refs.Ref{cmAll("a")}, Recorded: plan.Record{cmA: all("k", "1")}, Configs: map[string]plan.Config{cmA: optedOut("k", "2")}},
			want: plan.Plan{
				Action: plan.Refresh, Record: plan.Record{cmA: all("k", "2")},
				Ignored: []plan.Change{change(cmAll("a"), []string{"k"}, all("k", "1"), all("k", "2"))},
			},
		},
		{
			name: "present, opted out, nil entry, RestartOnCreate: recorded silently",
			in: plan.Input{
				Refs: []refs.Ref{cmAll("a")}, Recorded: plan.Record{cmA: nil},
				Configs: map[string]plan.Config{cmA: optedOut("k", "2")}, RestartOnCreate: true,
			},
			want: plan.Plan{
				Action: plan.Refresh, Record: plan.Record{cmA: all("k", "2")},
				Ignored: []plan.Change{change(cmAll("a"), []string{"k"}, nil, all("k", "2"))},
			},
		},
		{
			name: "present, opted out, no entry: recorded",
			in:   plan.Input{Refs: []refs.Ref{cmAll("a")}, Recorded: plan.Record{}, Configs: map[string]plan.Config{cmA: optedOut("k", "2")}},
			want: plan.Plan{Action: plan.Refresh, Record: plan.Record{cmA: all("k", "2")}},
		},
		{
			name: "present, opted out, same hashes: none",
			in:   plan.Input{Refs: []refs.Ref{cmAll("a")}, Recorded: plan.Record{cmA: all("k", "2")}, Configs: map[string]plan.Config{cmA: optedOut("k", "2")}},
			want: plan.Plan{Action: plan.None},
		},
		{
			name: "missing, no entry: recorded as nil",
			in:   plan.Input{Refs: []refs.Ref{cmAll("a")}, Recorded: plan.Record{}, Configs: map[string]plan.Config{cmA: missing}},
			want: plan.Plan{Action: plan.Refresh, Record: plan.Record{cmA: nil}},
		},
		{
			name: "missing, not in Configs at all: same as missing",
			in:   plan.Input{Refs: []refs.Ref{cmAll("a")}, Recorded: plan.Record{}},
			want: plan.Plan{Action: plan.Refresh, Record: plan.Record{cmA: nil}},
		},
		{
			name: "missing, hashes recorded: kept, deletion never restarts",
			in:   plan.Input{Refs: []refs.Ref{cmAll("a")}, Recorded: plan.Record{cmA: all("k", "1")}, Configs: map[string]plan.Config{cmA: missing}},
			want: plan.Plan{Action: plan.None},
		},
		{
			name: "missing, nil recorded: kept",
			in:   plan.Input{Refs: []refs.Ref{cmAll("a")}, Recorded: plan.Record{cmA: nil}, Configs: map[string]plan.Config{cmA: missing}, RestartOnCreate: true},
			want: plan.Plan{Action: plan.None},
		},
		{
			name: "missing, hashes recorded, another reference dropped: entry kept in the refreshed record",
			in:   plan.Input{Refs: []refs.Ref{cmAll("a")}, Recorded: plan.Record{cmA: all("k", "1"), cmB: all()}, Configs: map[string]plan.Config{cmA: missing}},
			want: plan.Plan{Action: plan.Refresh, Record: plan.Record{cmA: all("k", "1")}},
		},

		// The workload table.
		{
			name: "workload opted out, record present: forget, whatever changed",
			in: plan.Input{
				Annotations: optedOutAnnotations, Refs: []refs.Ref{cmAll("a")}, Recorded: plan.Record{cmA: all("k", "1")},
				Configs: map[string]plan.Config{cmA: present("k", "2")},
			},
			want: plan.Plan{Action: plan.Forget},
		},
		{
			name: "workload opted out, empty record present: forget",
			in:   plan.Input{Annotations: optedOutAnnotations, Recorded: plan.Record{}},
			want: plan.Plan{Action: plan.Forget},
		},
		{
			name: "workload opted out, record absent: none",
			in:   plan.Input{Annotations: optedOutAnnotations, Refs: []refs.Ref{cmAll("a")}, Configs: map[string]plan.Config{cmA: present("k", "2")}},
			want: plan.Plan{Action: plan.None},
		},
		{
			name: "record absent: adopt, no rollout",
			in: plan.Input{
				Refs:    []refs.Ref{cm("a", "k"), secAll("a")},
				Configs: map[string]plan.Config{cmA: present("k", "1", "x", "9"), secA: missing}, RestartOnCreate: true,
			},
			want: plan.Plan{Action: plan.Adopt, Record: plan.Record{cmA: entry("k", "1"), secA: nil}},
		},
		{
			name: "record absent, no references: none (nothing to record)",
			in:   plan.Input{},
			want: plan.Plan{Action: plan.None},
		},
		{
			name: "record present, no references any more: forget",
			in:   plan.Input{Recorded: plan.Record{cmA: entry("k", "1")}},
			want: plan.Plan{Action: plan.Forget},
		},

		// Per-key decisions.
		{
			name: "unused key changed: none",
			in:   plan.Input{Refs: []refs.Ref{cm("a", "a")}, Recorded: plan.Record{cmA: entry("a", "1")}, Configs: map[string]plan.Config{cmA: present("a", "1", "b", "3")}},
			want: plan.Plan{Action: plan.None},
		},
		{
			name: "used key changed: restart",
			in:   plan.Input{Refs: []refs.Ref{cm("a", "a")}, Recorded: plan.Record{cmA: entry("a", "1")}, Configs: map[string]plan.Config{cmA: present("a", "2", "b", "2")}},
			want: plan.Plan{
				Action: plan.Restart, Record: plan.Record{cmA: entry("a", "2")},
				Changes: []plan.Change{change(cm("a", "a"), []string{"a"}, entry("a", "1"), entry("a", "2"))},
			},
		},
		{
			name: "Keys lists exactly the changed keys read",
			in: plan.Input{
				Refs: []refs.Ref{cm("a", "a", "b", "c")}, Recorded: plan.Record{cmA: entry("a", "1", "b", "1", "c", "1")},
				Configs: map[string]plan.Config{cmA: present("a", "2", "b", "1", "c", "2", "d", "2")},
			},
			want: plan.Plan{
				Action: plan.Restart, Record: plan.Record{cmA: entry("a", "2", "b", "1", "c", "2")},
				Changes: []plan.Change{change(cm("a", "a", "b", "c"), []string{"a", "c"}, entry("a", "1", "b", "1", "c", "1"), entry("a", "2", "b", "1", "c", "2"))},
			},
		},
		{
			name: "key read removed: restart",
			in:   plan.Input{Refs: []refs.Ref{cm("a", "a", "b")}, Recorded: plan.Record{cmA: entry("a", "1", "b", "1")}, Configs: map[string]plan.Config{cmA: present("a", "1")}},
			want: plan.Plan{
				Action: plan.Restart, Record: plan.Record{cmA: entry("a", "1", "b", "")},
				Changes: []plan.Change{change(cm("a", "a", "b"), []string{"b"}, entry("a", "1", "b", "1"), entry("a", "1", "b", ""))},
			},
		},
		{
			name: "optional key appears: restart",
			in:   plan.Input{Refs: []refs.Ref{cm("a", "k")}, Recorded: plan.Record{cmA: entry("k", "")}, Configs: map[string]plan.Config{cmA: present("k", "1")}},
			want: plan.Plan{
				Action: plan.Restart, Record: plan.Record{cmA: entry("k", "1")},
				Changes: []plan.Change{change(cm("a", "k"), []string{"k"}, entry("k", ""), entry("k", "1"))},
			},
		},
		{
			name: "all keys: key added",
			in:   plan.Input{Refs: []refs.Ref{cmAll("a")}, Recorded: plan.Record{cmA: all("a", "1")}, Configs: map[string]plan.Config{cmA: present("a", "1", "b", "1")}},
			want: plan.Plan{
				Action: plan.Restart, Record: plan.Record{cmA: all("a", "1", "b", "1")},
				Changes: []plan.Change{change(cmAll("a"), []string{"b"}, all("a", "1"), all("a", "1", "b", "1"))},
			},
		},
		{
			name: "all keys: key removed",
			in:   plan.Input{Refs: []refs.Ref{cmAll("a")}, Recorded: plan.Record{cmA: all("a", "1", "b", "1")}, Configs: map[string]plan.Config{cmA: present("b", "1")}},
			want: plan.Plan{
				Action: plan.Restart, Record: plan.Record{cmA: all("b", "1")},
				Changes: []plan.Change{change(cmAll("a"), []string{"a"}, all("a", "1", "b", "1"), all("b", "1"))},
			},
		},
		{
			name: "reference removed from the spec: dropped from the record",
			in:   plan.Input{Refs: []refs.Ref{cmAll("a")}, Recorded: plan.Record{cmA: all("k", "1"), secA: all("p", "1")}, Configs: map[string]plan.Config{cmA: present("k", "1")}},
			want: plan.Plan{Action: plan.Refresh, Record: plan.Record{cmA: all("k", "1")}},
		},
		{
			name: "several changes, sorted; opted-out change ignored; unchanged reference kept",
			in: plan.Input{
				Refs:     []refs.Ref{cmAll("a"), cmAll("b"), cmAll("c"), secAll("a")},
				Recorded: plan.Record{cmA: all("k", "1"), cmB: all("k", "1"), "ConfigMap/c": all("k", "1"), secA: all("k", "1")},
				Configs: map[string]plan.Config{
					cmA: present("k", "2"), cmB: present("k", "1"), "ConfigMap/c": optedOut("k", "2"), secA: present("k", "1", "l", "1"),
				},
			},
			want: plan.Plan{
				Action: plan.Restart,
				Record: plan.Record{cmA: all("k", "2"), cmB: all("k", "1"), "ConfigMap/c": all("k", "2"), secA: all("k", "1", "l", "1")},
				Changes: []plan.Change{
					change(cmAll("a"), []string{"k"}, all("k", "1"), all("k", "2")),
					change(secAll("a"), []string{"l"}, all("k", "1"), all("k", "1", "l", "1")),
				},
				Ignored: []plan.Change{change(cmAll("c"), []string{"k"}, all("k", "1"), all("k", "2"))},
			},
		},

		// A template edit rolls once: keys read for the first time are
		// adopted, never taken for a change.
		{
			name: "template reads one more key of a used object: adopted",
			in:   plan.Input{Refs: []refs.Ref{cm("a", "k", "l")}, Recorded: plan.Record{cmA: entry("k", "1")}, Configs: map[string]plan.Config{cmA: present("k", "1", "l", "1")}},
			want: plan.Plan{Action: plan.Refresh, Record: plan.Record{cmA: entry("k", "1", "l", "1")}},
		},
		{
			name: "volume switched from items to the whole object: adopted",
			in:   plan.Input{Refs: []refs.Ref{cmAll("a")}, Recorded: plan.Record{cmA: entry("k", "1")}, Configs: map[string]plan.Config{cmA: present("k", "1", "l", "1")}},
			want: plan.Plan{Action: plan.Refresh, Record: plan.Record{cmA: all("k", "1", "l", "1")}},
		},
		{
			name: "volume switched from the whole object to items: adopted",
			in:   plan.Input{Refs: []refs.Ref{cm("a", "k")}, Recorded: plan.Record{cmA: all("k", "1", "l", "1")}, Configs: map[string]plan.Config{cmA: present("k", "1", "l", "2")}},
			want: plan.Plan{Action: plan.Refresh, Record: plan.Record{cmA: entry("k", "1")}},
		},
		{
			name: "switched to the whole object while a key read before changed: restart for that key only",
			in:   plan.Input{Refs: []refs.Ref{cmAll("a")}, Recorded: plan.Record{cmA: entry("k", "1")}, Configs: map[string]plan.Config{cmA: present("k", "2", "l", "1")}},
			want: plan.Plan{
				Action: plan.Restart, Record: plan.Record{cmA: all("k", "2", "l", "1")},
				Changes: []plan.Change{change(cmAll("a"), []string{"k"}, entry("k", "1"), all("k", "2", "l", "1"))},
			},
		},

		// A required key that disappears holds every restart.
		{
			name: "required key removed: nothing restarts, record kept, key reported",
			in:   plan.Input{Refs: []refs.Ref{required("a", []string{"k", "l"}, "k")}, Recorded: plan.Record{cmA: entry("k", "1", "l", "1")}, Configs: map[string]plan.Config{cmA: present("l", "2")}},
			want: plan.Plan{Action: plan.None, Missing: []plan.Missing{{Ref: required("a", []string{"k", "l"}, "k"), Keys: []string{"k"}}}},
		},
		{
			name: "required key removed while another object changed: still nothing restarts",
			in: plan.Input{
				Refs: []refs.Ref{required("a", []string{"k"}, "k"), secAll("a")}, Recorded: plan.Record{cmA: entry("k", "1"), secA: all("p", "1")},
				Configs: map[string]plan.Config{cmA: present(), secA: present("p", "2")},
			},
			want: plan.Plan{Action: plan.None, Missing: []plan.Missing{{Ref: required("a", []string{"k"}, "k"), Keys: []string{"k"}}}},
		},
		{
			name: "required key back with new content: restart",
			in:   plan.Input{Refs: []refs.Ref{required("a", []string{"k"}, "k")}, Recorded: plan.Record{cmA: entry("k", "1")}, Configs: map[string]plan.Config{cmA: present("k", "2")}},
			want: plan.Plan{
				Action: plan.Restart, Record: plan.Record{cmA: entry("k", "2")},
				Changes: []plan.Change{change(required("a", []string{"k"}, "k"), []string{"k"}, entry("k", "1"), entry("k", "2"))},
			},
		},
		{
			name: "required key missing at adoption: adopted, key reported",
			in:   plan.Input{Refs: []refs.Ref{required("a", []string{"k"}, "k")}, Configs: map[string]plan.Config{cmA: present("l", "1")}},
			want: plan.Plan{
				Action: plan.Adopt, Record: plan.Record{cmA: entry("k", "")},
				Missing: []plan.Missing{{Ref: required("a", []string{"k"}, "k"), Keys: []string{"k"}}},
			},
		},

		// Workloads that could never be restarted are not written.
		{
			name: "record absent, every object missing (ignored, excluded, not there): none",
			in:   plan.Input{Refs: []refs.Ref{cmAll("a"), cm("b", "k")}, Configs: map[string]plan.Config{cmA: missing}},
			want: plan.Plan{Action: plan.None},
		},
		{
			name: "record absent, every object missing, RestartOnCreate: adopt, so that a creation restarts",
			in:   plan.Input{Refs: []refs.Ref{cmAll("a")}, RestartOnCreate: true},
			want: plan.Plan{Action: plan.Adopt, Record: plan.Record{cmA: nil}},
		},

		// Deletion as a trigger (ReloadOnDelete).
		{
			name: "deleted, ReloadOnDelete, optional reference: restart, recorded as gone",
			in:   plan.Input{Refs: []refs.Ref{optionalAll("a")}, Recorded: plan.Record{cmA: all("k", "1")}, Configs: map[string]plan.Config{cmA: missing}, ReloadOnDelete: true},
			want: plan.Plan{
				Action: plan.Restart, Record: plan.Record{cmA: nil},
				Changes: []plan.Change{change(optionalAll("a"), []string{"k"}, all("k", "1"), nil)},
			},
		},
		{
			name: "deleted, ReloadOnDelete, required reference: nothing restarts, reported",
			in:   plan.Input{Refs: []refs.Ref{cmAll("a")}, Recorded: plan.Record{cmA: all("k", "1")}, Configs: map[string]plan.Config{cmA: missing}, ReloadOnDelete: true},
			want: plan.Plan{Action: plan.None, Missing: []plan.Missing{{Ref: cmAll("a")}}},
		},
		{
			name: "deleted, no ReloadOnDelete, optional reference: deletion never restarts",
			in:   plan.Input{Refs: []refs.Ref{optionalAll("a")}, Recorded: plan.Record{cmA: all("k", "1")}, Configs: map[string]plan.Config{cmA: missing}},
			want: plan.Plan{Action: plan.None},
		},
		{
			name: "never existed, ReloadOnDelete: nothing to do",
			in:   plan.Input{Refs: []refs.Ref{optionalAll("a")}, Recorded: plan.Record{cmA: nil}, Configs: map[string]plan.Config{cmA: missing}, ReloadOnDelete: true},
			want: plan.Plan{Action: plan.None},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.Rules = rules
			got := plan.Decide(in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Decide() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecideHistory runs Decide over a sequence of states, writing each plan's
// record back through its annotation encoding as the controller does.
func TestDecideHistory(t *testing.T) {
	type step struct {
		cfg  plan.Config
		want plan.Action
	}
	tests := []struct {
		name            string
		restartOnCreate bool
		steps           []step
	}{
		{"deleted, recreated with the same content", false, []step{
			{present("k", "1"), plan.Adopt}, {missing, plan.None}, {present("k", "1"), plan.None},
		}},
		{"deleted, recreated with other content", false, []step{
			{present("k", "1"), plan.Adopt}, {missing, plan.None}, {present("k", "2"), plan.Restart}, {present("k", "2"), plan.None},
		}},
		{"created later, RestartOnCreate off: nothing recorded until it exists", false, []step{
			{missing, plan.None}, {missing, plan.None}, {present("k", "1"), plan.Adopt}, {present("k", "2"), plan.Restart},
		}},
		{"created later, RestartOnCreate on", true, []step{
			{missing, plan.Adopt}, {present("k", "1"), plan.Restart}, {present("k", "1"), plan.None},
		}},
		{"opted-out change then opt-in: the ignored change does not come back", false, []step{
			{present("k", "1"), plan.Adopt}, {optedOut("k", "2"), plan.Refresh}, {present("k", "2"), plan.None}, {present("k", "3"), plan.Restart},
		}},
		{"empty object, then a key added", false, []step{
			{present(), plan.Adopt}, {present(), plan.None}, {present("k", "1"), plan.Restart},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var annotation *string
			for i, s := range tt.steps {
				in := plan.Input{Rules: rules, Refs: []refs.Ref{cmAll("a")}, Configs: map[string]plan.Config{cmA: s.cfg}, RestartOnCreate: tt.restartOnCreate}
				if annotation != nil {
					r, err := plan.ParseRecord(*annotation)
					if err != nil {
						t.Fatalf("step %d: ParseRecord(%s): %v", i, *annotation, err)
					}
					in.Recorded = r
				}
				p := plan.Decide(in)
				if p.Action != s.want {
					t.Fatalf("step %d: action %v, want %v (record %v, plan %+v)", i, p.Action, s.want, in.Recorded, p)
				}
				if p.Action != plan.None {
					a := p.Record.String()
					annotation = &a
				}
			}
		})
	}
}

func TestActionString(t *testing.T) {
	want := map[plan.Action]string{plan.None: "none", plan.Forget: "forget", plan.Adopt: "adopt", plan.Refresh: "refresh", plan.Restart: "restart"}
	for a, s := range want {
		if a.String() != s {
			t.Errorf("Action(%d).String() = %q, want %q", a, a.String(), s)
		}
	}
}
