package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// codePath is a code span naming a path of the repository.
var codePath = regexp.MustCompile("`((?:internal|cmd|test|hack|deploy|docs|api)/[^` ]+)`")

// TestStylePaths: every path the house rules of docs/style.md name
// exists, so that "where a new thing goes" points at real files.
func TestStylePaths(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "docs", "style.md"))
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, m := range codePath.FindAllStringSubmatch(string(data), -1) {
		found++
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(m[1]))); err != nil {
			t.Errorf("docs/style.md names %s, which does not exist", m[1])
		}
	}
	if found < 10 {
		t.Errorf("docs/style.md names only %d paths: is the pattern broken?", found)
	}
}

// TestTierTable: the test-tier table of docs/development.md has a row for
// every package of test/integration, each of which starts something
// `make unit` must not.
func TestTierTable(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "docs", "development.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(data), "\n## Tests\n")
	if !ok {
		t.Fatal("docs/development.md has no section ## Tests")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	rows := map[string]bool{}
	for _, line := range strings.Split(table, "\n") {
		if cells := strings.Split(line, "|"); len(cells) > 2 {
			rows[strings.TrimSpace(cells[1])] = true
		}
	}
	dirs, err := filepath.Glob(filepath.Join(root, "test", "integration", "*", "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"`test/integration`": true}
	for _, f := range dirs {
		rel, _ := filepath.Rel(root, filepath.Dir(f))
		want["`"+filepath.ToSlash(rel)+"`"] = true
	}
	for w := range want {
		if !rows[w] {
			t.Errorf("docs/development.md's test-tier table has no row %s", w)
		}
	}
}
