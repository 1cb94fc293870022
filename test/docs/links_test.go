package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// root is the repository's root, from this package's directory.
var root = filepath.Join("..", "..")

// markdownFiles are the documents whose links are checked, relative to
// root: the README, every file of docs/ and the chart's README.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("docs/ holds no .md file")
	}
	for i, f := range files {
		files[i], _ = filepath.Rel(root, f)
	}
	return append([]string{"README.md", filepath.Join("deploy", "helm", "watcher", "README.md")}, files...)
}

// doc is a Markdown file read for its links and headings.
type doc struct {
	// text is the file without its fenced code blocks, HTML comments and
	// inline code spans: what is left holds the links and headings.
	text string
	// anchors are the fragments of its headings, as GitHub makes them.
	anchors map[string]bool
}

var (
	fence   = regexp.MustCompile("(?ms)^ *```.*?^ *```[^\n]*$")
	comment = regexp.MustCompile(`(?s)<!--.*?-->`)
	heading = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *#* *$`)
	// link is an inline link or image, [text](target) or
	// [text](target "title"); the target has no space.
	link = regexp.MustCompile(`\]\(<?([^)\s>]*)>?(?:\s+"[^"]*")?\)`)
	// scheme marks a link that leaves the repository (https:, mailto:...).
	scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

func readDoc(t *testing.T, path string) doc {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	text := comment.ReplaceAllString(fence.ReplaceAllString(string(data), ""), "")
	d := doc{anchors: map[string]bool{}}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(text, -1) {
		a := anchor(m[1])
		if n := seen[a]; n > 0 {
			d.anchors[a+"-"+strconv.Itoa(n)] = true
		} else {
			d.anchors[a] = true
		}
		seen[a]++
	}
	d.text = dropCodeSpans(text)
	return d
}

// dropCodeSpans removes the inline code spans of text: a run of backticks
// up to the next run of as many (CommonMark), which may cross a line. A run
// that is never closed stays, as plain text.
func dropCodeSpans(text string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(text, '`')
		if i < 0 {
			return b.String() + text
		}
		b.WriteString(text[:i])
		n := len(text[i:]) - len(strings.TrimLeft(text[i:], "`"))
		rest := text[i+n:]
		end := -1
		for j := 0; j < len(rest); {
			k := strings.IndexByte(rest[j:], '`')
			if k < 0 {
				break
			}
			run := len(rest[j+k:]) - len(strings.TrimLeft(rest[j+k:], "`"))
			if run == n {
				end = j + k + run
				break
			}
			j += k + run
		}
		if end < 0 {
			b.WriteString(text[i : i+n])
			text = rest
			continue
		}
		text = rest[end:]
	}
}

// anchor is the fragment GitHub gives a heading: the text of its links
// kept, lower case, spaces turned into -, every other character but
// letters, digits, - and _ dropped.
func anchor(h string) string {
	h = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 && isLetter(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isLetter(r rune) bool { return strings.ToUpper(string(r)) != strings.ToLower(string(r)) }

// TestAnchor: the fragments GitHub makes of this project's headings.
func TestAnchor(t *testing.T) {
	for h, want := range map[string]string{
		"Restart guards":                "restart-guards",
		"Reloader's annotations":        "reloaders-annotations",
		"How it decides to restart":     "how-it-decides-to-restart",
		"Explain and graph: the CLI":    "explain-and-graph-the-cli",
		"`watcher explain` and `graph`": "watcher-explain-and-graph",
		"Dry run (`--dry-run`)":         "dry-run---dry-run",
		"See [RBAC](#rbac) first":       "see-rbac-first",
	} {
		if got := anchor(h); got != want {
			t.Errorf("anchor(%q) = %q, want %q", h, got, want)
		}
	}
}

// TestLinks: every relative link of the README, docs/ and the chart's
// README names a file or directory of the repository, and a #fragment names
// a heading of the Markdown file it points to.
func TestLinks(t *testing.T) {
	docs := map[string]doc{}
	get := func(path string) doc {
		d, ok := docs[path]
		if !ok {
			d = readDoc(t, path)
			docs[path] = d
		}
		return d
	}
	checked := 0
	for _, file := range markdownFiles(t) {
		for _, m := range link.FindAllStringSubmatch(get(file).text, -1) {
			target := m[1]
			if target == "" || scheme.MatchString(target) {
				continue
			}
			checked++
			path, frag, _ := strings.Cut(target, "#")
			if path == "" {
				path = file
			} else {
				path = filepath.Clean(filepath.Join(filepath.Dir(file), path))
				if strings.HasPrefix(path, "..") {
					t.Errorf("%s: link %q leaves the repository", file, target)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, path)); err != nil {
					t.Errorf("%s: link %q: no file %s", file, target, path)
					continue
				}
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(path, ".md") {
				t.Errorf("%s: link %q: a fragment of a file that is not Markdown", file, target)
				continue
			}
			if !get(path).anchors[frag] {
				t.Errorf("%s: link %q: %s has no heading #%s", file, target, path, frag)
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d relative links found: is the link pattern broken?", checked)
	}
}

// TestReadmeLinksEveryDoc: every file of docs/ is reachable from the
// README.
func TestReadmeLinksEveryDoc(t *testing.T) {
	readme := readDoc(t, "README.md")
	linked := map[string]bool{}
	for _, m := range link.FindAllStringSubmatch(readme.text, -1) {
		path, _, _ := strings.Cut(m[1], "#")
		linked[filepath.Clean(path)] = true
	}
	for _, f := range markdownFiles(t) {
		if strings.HasPrefix(f, "docs"+string(filepath.Separator)) && !linked[f] {
			t.Errorf("README.md does not link to %s", f)
		}
	}
}

// TestLayout: the layout table of docs/development.md names every
// directory of internal/ and cmd/ that holds Go code, and every path of
// internal/ and cmd/ it names exists.
func TestLayout(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "docs", "development.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(data), "\n## Layout\n")
	if !ok {
		t.Fatal("docs/development.md has no section ## Layout")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	listed := map[string]bool{}
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(cells[1], -1) {
			listed[strings.TrimSuffix(m[1], "/")] = true
		}
	}
	var packages []string
	for _, top := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(path, ".go") {
				return err
			}
			dir, _ := filepath.Rel(root, filepath.Dir(path))
			if !slices.Contains(packages, filepath.ToSlash(dir)) {
				packages = append(packages, filepath.ToSlash(dir))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(packages) < 10 {
		t.Fatalf("found %d packages under internal/ and cmd/: %v", len(packages), packages)
	}
	for _, p := range packages {
		if !listed[p] {
			t.Errorf("docs/development.md's layout table has no row for %s", p)
		}
	}
	for p := range listed {
		if strings.HasPrefix(p, "internal/") || strings.HasPrefix(p, "cmd/") {
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(p))); err != nil {
				t.Errorf("docs/development.md's layout table names %s, which does not exist", p)
			}
		}
	}
}

// TestDropCodeSpans: links inside code spans are not links; those beside
// them are.
func TestDropCodeSpans(t *testing.T) {
	for in, want := range map[string]string{
		"a `[x](y)` b":              "a  b",
		"a `` ` `` [x](y)":          "a  [x](y)",
		"`kubectl\n--flag` [x](y)":  " [x](y)",
		"one ` never closed [x](y)": "one ` never closed [x](y)",
		"``a`b`` [x](y)":            " [x](y)",
	} {
		if got := dropCodeSpans(in); got != want {
			t.Errorf("dropCodeSpans(%q) = %q, want %q", in, got, want)
		}
	}
}
