package install

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.yaml.in/yaml/v3"
)

var update = flag.Bool("update", false, "rewrite the values table of the chart's README from values.yaml")

// notValues are the settings of watcher --help the chart sets otherwise:
// the kubeconfig (in a pod: the in-cluster config), its own namespace (the
// pod's, from the downward API), a former name of RELOAD_ON_CREATE, and
// Reloader's port, served only in Reloader's own Deployment (the chart's
// /metrics carries Reloader's metrics too).
var notValues = map[string]bool{"KUBECONFIG": true, "LOCAL_CONFIG": true, "POD_NAMESPACE": true, "RESTART_ON_CREATE": true, "RELOADER_ADDR": true}

// chartDefaults are the settings whose chart default differs from
// watcher's on purpose.
var chartDefaults = map[string]string{"LOG_FORMAT": "json"}

// TestValuesCoverFlags: every setting of `watcher --help` is a value of the
// chart (named by `(env NAME)` in values.yaml), and the chart's defaults,
// rendered into the Deployment, are watcher's own (in both the lease and the
// redis lock modes). A new flag without its value fails here.
func TestValuesCoverFlags(t *testing.T) {
	g := NewWithT(t)
	help := helpDefaults(t)
	documented := map[string]bool{}
	for _, r := range valueRows(t) {
		if r.env != "" {
			documented[r.env] = true
		}
	}
	for env := range help {
		if !notValues[env] {
			g.Expect(documented).To(HaveKey(env), "watcher --help has %s, values.yaml has no value for it", env)
		}
	}
	rendered := map[string]string{}
	for _, mode := range []string{"lease", "redis"} {
		for k, v := range envOf(deployment(t, render(t, "watcher", "watcher", "--set", "lock.mode="+mode))) {
			if _, ok := rendered[k]; !ok { // the lease mode's LOCK_BACKEND, the default
				rendered[k] = v
			}
		}
	}
	for env, def := range help {
		got, ok := rendered[env]
		switch {
		case notValues[env]:
		case chartDefaults[env] != "":
			g.Expect(got).To(Equal(chartDefaults[env]), env)
		case !ok:
			g.Expect(def).To(BeEmpty(), "%s: watcher's default is %q, the chart sets nothing", env, def)
		default:
			g.Expect(sameSetting(env, got, def)).To(BeTrue(), "%s: chart default %q, watcher's %q", env, got, def)
		}
	}
}

// sameSetting compares a rendered value with watcher's default: durations
// by length, rates ("5/10m") by count and length, addresses ":8080" as
// they are.
func sameSetting(env, got, def string) bool {
	if got == def {
		return true
	}
	if n1, d1, ok := strings.Cut(got, "/"); ok {
		n2, d2, ok := strings.Cut(def, "/")
		return ok && n1 == n2 && sameSetting(env, d1, d2)
	}
	a, errA := time.ParseDuration(got)
	b, errB := time.ParseDuration(def)
	return errA == nil && errB == nil && a == b
}

// helpDefaults reads `watcher --help`: each setting's env var and default
// ("" for none).
func helpDefaults(t *testing.T) map[string]string {
	t.Helper()
	out, _ := exec.Command(watcherBin, "--help").CombinedOutput()
	re := regexp.MustCompile(`^\s+env (\S+), default (.*)$`)
	defaults := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			def := m[2]
			if def == "none" {
				def = ""
			}
			defaults[m[1]] = def
		}
	}
	if len(defaults) < 30 {
		t.Fatalf("watcher --help lists %d settings:\n%s", len(defaults), out)
	}
	return defaults
}

// valueRow is one documented value of values.yaml.
type valueRow struct {
	key, env, def, doc string
}

var envRef = regexp.MustCompile(`^\(env ([A-Z_]+)\)\s*`)

// valueRows reads values.yaml: every key with a `# --` comment is a row,
// every other mapping a group of rows.
func valueRows(t *testing.T) []valueRow {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var rows []valueRow
	var walk func(prefix string, m *yaml.Node)
	walk = func(prefix string, m *yaml.Node) {
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], m.Content[i+1]
			key := prefix + k.Value
			text := commentText(k.HeadComment)
			if text == "" {
				if v.Kind != yaml.MappingNode {
					t.Errorf("values.yaml: %s has no `# --` comment", key)
					continue
				}
				walk(key+".", v)
				continue
			}
			var value any
			if err := v.Decode(&value); err != nil {
				t.Fatal(err)
			}
			def, _ := json.Marshal(value)
			r := valueRow{key: key, def: string(def), doc: text}
			if m := envRef.FindStringSubmatch(text); m != nil {
				r.env, r.doc = m[1], text[len(m[0]):]
			}
			rows = append(rows, r)
		}
	}
	walk("", doc.Content[0])
	return rows
}

// commentText returns the text of the `# --` comment of a key (the last
// comment block above it), joined into one line; "" if there is none.
func commentText(head string) string {
	blocks := strings.Split(head, "\n\n")
	last := blocks[len(blocks)-1]
	if !strings.HasPrefix(last, "# --") {
		return ""
	}
	var words []string
	for _, l := range strings.Split(last, "\n") {
		l = strings.TrimPrefix(strings.TrimPrefix(l, "# --"), "#")
		words = append(words, strings.Fields(l)...)
	}
	return strings.Join(words, " ")
}

const (
	tableBegin = "<!-- values table: made by `go test ./test/install -run TestValuesTable -update` from deploy/helm/watcher/values.yaml -->"
	tableEnd   = "<!-- end of the values table -->"
)

// TestValuesTable: the values table of the chart's README
// (deploy/helm/watcher/README.md) is the one values.yaml makes, so it
// cannot go stale. -update rewrites it.
func TestValuesTable(t *testing.T) {
	var b strings.Builder
	b.WriteString("| Value | Default | Env | Meaning |\n| --- | --- | --- | --- |\n")
	for _, r := range valueRows(t) {
		env := ""
		if r.env != "" {
			env = "`" + r.env + "`"
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s |\n", r.key, r.def, env, strings.ReplaceAll(r.doc, "|", `\|`))
	}
	want := tableBegin + "\n" + b.String() + tableEnd
	path := filepath.Join(chart, "README.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	i, j := strings.Index(readme, tableBegin), strings.Index(readme, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no values table between %q and %q", path, tableBegin, tableEnd)
	}
	got := readme[i : j+len(tableEnd)]
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(readme[:i]+want+readme[j+len(tableEnd):]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the values table of %s is stale: run go test ./test/install -run TestValuesTable -update; want:\n%s", path, want)
}
