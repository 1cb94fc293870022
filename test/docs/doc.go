// Package docs holds the tests of the project's documentation: every
// relative link of README.md, docs/*.md and the chart's README resolves to
// a file and, with a #fragment, to a heading of it; the README links to
// every file of docs/; and the layout table of docs/development.md names
// every package under internal/ and cmd/, the test-tier table every package
// of test/integration, and every path docs/style.md names exists. It has no
// code of its own.
package docs
