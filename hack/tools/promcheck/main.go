// Command promcheck checks what watcher ships for Prometheus and Grafana with
// Prometheus's own parsers, as promtool would: a rules file (the spec of the
// chart's PrometheusRule) with model/rulefmt, and every PromQL expression of a
// Grafana dashboard with promql/parser. It prints the metric names the rules
// and the dashboard use, one per line, so that a test can compare them with
// the metrics watcher exports. Exit code 1 lists every problem found.
//
//	promcheck -rules rules.yaml -dashboard dashboard.json
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// grafanaVars are the Grafana variables the dashboard's expressions may use,
// with what to put in their place before parsing.
var grafanaVars = strings.NewReplacer(
	"$__rate_interval", "5m",
	"$__interval", "1m",
	"$__range", "1h",
	"$namespace", "watcher",
	"$job", "watcher",
	"$pod", "watcher-0",
)

func main() {
	rules := flag.String("rules", "", "Prometheus rules file to check")
	dashboard := flag.String("dashboard", "", "Grafana dashboard JSON to check")
	flag.Parse()
	names := map[string]bool{}
	var errs []error
	if *rules != "" {
		errs = append(errs, checkRules(*rules, names)...)
	}
	if *dashboard != "" {
		errs = append(errs, checkDashboard(*dashboard, names)...)
	}
	if len(errs) > 0 {
		fmt.Fprintln(os.Stderr, errors.Join(errs...))
		os.Exit(1)
	}
	for _, n := range slices.Sorted(func(yield func(string) bool) {
		for n := range names {
			if !yield(n) {
				return
			}
		}
	}) {
		fmt.Println(n)
	}
}

// checkRules parses a rules file as Prometheus loads it, strictly (unknown
// fields are errors), and records the metric names of its expressions.
func checkRules(path string, names map[string]bool) []error {
	p := parser.NewParser(parser.Options{})
	groups, errs := rulefmt.ParseFile(path, false, model.UTF8Validation, p, slog.Default())
	if len(errs) > 0 {
		return errs
	}
	if len(groups.Groups) == 0 {
		return []error{fmt.Errorf("%s: no rule groups", path)}
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" && (r.Annotations["summary"] == "" || r.Labels["severity"] == "") {
				errs = append(errs, fmt.Errorf("%s: alert %s needs a summary annotation and a severity label", path, r.Alert))
			}
			errs = append(errs, collect(p, "alert "+r.Alert+r.Record, r.Expr, names)...)
		}
	}
	return errs
}

// panel is what of a Grafana panel holds queries: its targets, and the
// panels of a row.
type panel struct {
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

// checkDashboard parses a dashboard and every expression of its panels.
func checkDashboard(path string, names map[string]bool) []error {
	data, err := os.ReadFile(path)
	if err != nil {
		return []error{err}
	}
	var d struct {
		Title  string  `json:"title"`
		UID    string  `json:"uid"`
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return []error{fmt.Errorf("%s: %w", path, err)}
	}
	if d.Title == "" || d.UID == "" {
		return []error{fmt.Errorf("%s: a dashboard needs a title and a uid", path)}
	}
	p := parser.NewParser(parser.Options{})
	var errs []error
	exprs := 0
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, pn := range ps {
			for _, t := range pn.Targets {
				exprs++
				errs = append(errs, collect(p, "panel "+pn.Title, grafanaVars.Replace(t.Expr), names)...)
			}
			walk(pn.Panels)
		}
	}
	walk(d.Panels)
	if exprs == 0 {
		errs = append(errs, fmt.Errorf("%s: no expressions", path))
	}
	return errs
}

// collect parses expr and records the metric names it selects.
func collect(p parser.Parser, where, expr string, names map[string]bool) []error {
	e, err := p.ParseExpr(expr)
	if err != nil {
		return []error{fmt.Errorf("%s: %q: %w", where, expr, err)}
	}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok && vs.Name != "" {
			names[vs.Name] = true
		}
		return nil
	})
	return nil
}
