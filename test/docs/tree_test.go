package docs

import (
	"os"
	"path/filepath"
	"regexp"
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
