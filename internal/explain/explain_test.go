package explain_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gonum.org/v1/gonum/graph/formats/dot"

	"github.com/watcher-dev/watcher/internal/explain"
	"github.com/watcher-dev/watcher/internal/refs"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/explain -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", name, diff)
	}
}

// TestGolden: the text, JSON and DOT outputs of the scenario, byte for
// byte, and none of them shows a Secret value or a whole hash.
func TestGolden(t *testing.T) {
	s := newScenario()
	set := settings()
	ws := s.workloads()
	outputs := map[string][]byte{}
	for _, w := range ws[:2] {
		rep, err := explain.ExplainWorkload(set, w)
		if err != nil {
			t.Fatal(err)
		}
		var text, js bytes.Buffer
		if err := rep.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		if err := explain.WriteJSON(&js, rep); err != nil {
			t.Fatal(err)
		}
		name := strings.ToLower(rep.Kind) + "-" + rep.Name
		outputs["explain-"+name+".txt"], outputs["explain-"+name+".json"] = text.Bytes(), js.Bytes()
	}
	for _, c := range []explain.Config{s.configs["ConfigMap/app-config"], s.configs["Secret/db"]} {
		rep := explain.ExplainConfig(set, c, ws)
		var text, js bytes.Buffer
		if err := rep.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		if err := explain.WriteJSON(&js, rep); err != nil {
			t.Fatal(err)
		}
		name := strings.ToLower(rep.Kind) + "-" + rep.Name
		outputs["explain-"+name+".txt"], outputs["explain-"+name+".json"] = text.Bytes(), js.Bytes()
	}
	g := explain.BuildGraph(set, s.objects(), func(kind refs.Kind, _, name string) explain.Config {
		c := s.configs[string(kind)+"/"+name]
		c.Keys = nil // a graph reads metadata only
		return c
	})
	var text, js, dg bytes.Buffer
	for _, err := range []error{g.WriteText(&text), explain.WriteJSON(&js, g), g.WriteDOT(&dg)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	outputs["graph.txt"], outputs["graph.json"], outputs["graph.dot"] = text.Bytes(), js.Bytes(), dg.Bytes()

	var hashes []string
	for _, c := range s.configs {
		for _, h := range c.Keys {
			hashes = append(hashes, h)
		}
	}
	for name, out := range outputs {
		golden(t, name, out)
		for _, secret := range []string{secretValue, oldSecretValue} {
			if bytes.Contains(out, []byte(secret)) {
				t.Errorf("%s shows a Secret value", name)
			}
		}
		for _, h := range hashes {
			if bytes.Contains(out, []byte(h)) {
				t.Errorf("%s shows a whole hash %s; only %d digits may be shown", name, h, explain.HashPrefix)
			}
		}
	}
	if _, err := dot.ParseString(dg.String()); err != nil {
		t.Errorf("graph.dot is not valid DOT: %v", err)
	}
}
