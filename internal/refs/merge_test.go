package refs_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/watcher-dev/watcher/internal/refs"
)

func TestMerge(t *testing.T) {
	keys := func(name string, ks []string, req ...string) refs.Ref {
		return refs.Ref{Kind: refs.ConfigMap, Name: name, Keys: ks, Required: req}
	}
	whole := func(name string) refs.Ref { return refs.Ref{Kind: refs.ConfigMap, Name: name, AllKeys: true} }
	sec := refs.Ref{Kind: refs.Secret, Name: "a", AllKeys: true}
	tests := []struct {
		name  string
		lists [][]refs.Ref
		want  []refs.Ref
	}{
		{"nothing", nil, []refs.Ref{}},
		{"one list, unchanged", [][]refs.Ref{{keys("a", []string{"k"}, "k"), sec}}, []refs.Ref{keys("a", []string{"k"}, "k"), sec}},
		{"keys united, required if any requires", [][]refs.Ref{{keys("a", []string{"k", "l"}, "k")}, {keys("a", []string{"l", "m"}, "l")}},
			[]refs.Ref{keys("a", []string{"k", "l", "m"}, "k", "l")}},
		{"whole wins", [][]refs.Ref{{keys("a", []string{"k"}, "k")}, {whole("a")}}, []refs.Ref{whole("a")}},
		{"optional only when every list says so", [][]refs.Ref{{{Kind: refs.ConfigMap, Name: "a", AllKeys: true, Optional: true}}, {keys("a", []string{"k"}, "k")}},
			[]refs.Ref{whole("a")}},
		{"optional in every list: optional", [][]refs.Ref{{{Kind: refs.ConfigMap, Name: "a", AllKeys: true, Optional: true}}, {{Kind: refs.ConfigMap, Name: "a", Keys: []string{"k"}, Optional: true}}},
			[]refs.Ref{{Kind: refs.ConfigMap, Name: "a", AllKeys: true, Optional: true}}},
		{"kinds apart, sorted", [][]refs.Ref{{sec}, {whole("b"), whole("a")}}, []refs.Ref{whole("a"), whole("b"), sec}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, refs.Merge(tt.lists...)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
