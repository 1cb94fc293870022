package migrate

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/workload"
)

// Difference is one thing watcher does otherwise than the running Reloader.
type Difference struct {
	// Topic is one of the Topic* constants.
	Topic string `json:"topic"`
	// Restarts: it changes which workloads restart, or when, on this
	// cluster; false: the same restarts, done differently.
	Restarts bool `json:"restarts"`
	// Text says it, and what to set to behave as Reloader.
	Text string `json:"text"`
	// Workloads are those concerned ("Kind namespace/name"), at most
	// MaxListed; Count counts them all.
	Workloads []string `json:"workloads,omitempty"`
	Count     int      `json:"count,omitempty"`
}

// The topics of the differences.
const (
	TopicOwnValues   = "own-values"
	TopicKinds       = "kinds"
	TopicStrategy    = "strategy"
	TopicFlags       = "flags"
	TopicAnnotations = "annotations"
	TopicGuards      = "guards"
)

// MaxListed is how many workloads a Difference names.
const MaxListed = 10

// differences find the differences, each of one topic, in the order they
// are printed: a new one is one function and one line here.
var differences = []func(Input) []Difference{ownValues, kinds, strategy, flags, annotations, guards}

// ownValues: the workloads whose restarts differ when watcher is
// installed with its own values (discovery all, its ignored namespaces)
// instead of Reloader's arguments.
func ownValues(in Input) []Difference {
	lost := map[string][]Workload{}
	var gained []Workload
	for _, w := range in.Workloads {
		switch {
		case w.WithReloaderArgs && !w.WithOwnValues:
			lost[w.OwnValuesWhyNot] = append(lost[w.OwnValuesWhyNot], w)
		case !w.WithReloaderArgs && w.WithOwnValues:
			gained = append(gained, w)
		}
	}
	var out []Difference
	for _, why := range slices.Sorted(maps.Keys(lost)) {
		ws := lost[why]
		out = append(out, listed(Difference{Topic: TopicOwnValues, Restarts: true,
			Text: fmt.Sprintf("only if installed with watcher's own values instead of Reloader's arguments: %s Reloader restarts would not be (%s); namespaces: %s",
				plural(len(ws), "workload"), why, strings.Join(namespaces(ws), ", "))}, ws))
	}
	if len(gained) > 0 {
		out = append(out, listed(Difference{Topic: TopicOwnValues, Restarts: true,
			Text: fmt.Sprintf("only if installed with watcher's own values instead of Reloader's arguments: %s not opting in would restart too (discovery all)", plural(len(gained), "workload"))}, gained))
	}
	return out
}

// kinds: CronJobs, Jobs and Argo Rollouts, which watcher restarts otherwise.
func kinds(in Input) []Difference {
	by := map[string][]Workload{}
	for _, w := range in.Workloads {
		if w.WithReloaderArgs {
			by[w.Kind] = append(by[w.Kind], w)
		}
	}
	var out []Difference
	if ws := by[workload.CronJob.Name()]; len(ws) > 0 && !in.Options.CronJobTrigger {
		out = append(out, listed(Difference{Topic: TopicKinds, Restarts: true,
			Text: "CronJobs: Reloader creates a Job from the CronJob at once; watcher updates its pod template, so that its next Jobs run with the new configuration. To run one at once as well: restart.cronjobTrigger=true (--cronjob-trigger)"}, ws))
	}
	if ws := by[workload.Job.Name()]; len(ws) > 0 {
		out = append(out, listed(Difference{Topic: TopicKinds,
			Text: "Jobs: both delete and create again a Job that opts in; watcher first asks the API server whether it would accept the new Job (a dry-run create) and never deletes one it could not create again"}, ws))
	}
	argo, _ := flag(in.Reloader.Args, "is-Argo-Rollouts", true)
	if ws := by[workload.Rollout.Name()]; len(ws) > 0 && argo != "true" {
		out = append(out, listed(Difference{Topic: TopicKinds, Restarts: true,
			Text: "Argo Rollouts: Reloader restarts none without --is-Argo-Rollouts; watcher restarts those that opt in whenever their API is served. To leave them alone: --ignore-workload-kinds=Rollout"}, ws))
	}
	return out
}

// strategy: how a restart is written.
func strategy(in Input) []Difference {
	theirs, _ := flag(in.Reloader.Args, "reload-strategy", false)
	if theirs == "" || theirs == "default" {
		theirs = "env-vars"
	}
	ours := in.Options.RestartStrategy
	if map[string]string{"env-vars": "env", "annotations": "annotation"}[theirs] == ours {
		return []Difference{{Topic: TopicStrategy, Text: fmt.Sprintf("restarts are written the same way: Reloader's %s is watcher's %s", theirs, ours)}}
	}
	var marked []Workload
	for _, w := range in.Workloads {
		if len(w.Marks) > 0 {
			marked = append(marked, w)
		}
	}
	left := ""
	if len(marked) > 0 {
		left = ", and Reloader's marks stay where they are (the workloads listed carry them)"
	}
	return []Difference{listed(Difference{Topic: TopicStrategy,
		Text: fmt.Sprintf("Reloader writes a restart as %s, watcher as %s (%s); pods restart either way%s. To write as Reloader: --restart-strategy=%s",
			theirs, ours, restartDoc(ours), left, map[string]string{"env-vars": "env", "annotations": "annotation"}[theirs])}, marked)}
}

// restartDoc says what a strategy of watcher's writes.
func restartDoc(name string) string {
	switch name {
	case restart.Default.Name():
		return "the pod-template annotation watcher.dev/restarted-for"
	case "env":
		return "an environment variable on every container"
	}
	return "see docs/configuration.md"
}

// flags: Reloader's settings that watcher reads with a remark.
func flags(in Input) []Difference {
	var out []Difference
	for _, n := range in.Options.Notes {
		if strings.HasPrefix(n, "Reloader's --") {
			out = append(out, Difference{Topic: TopicFlags, Text: n})
		}
	}
	return out
}

// annotations: Reloader's annotations in use, read the same, and how auto
// differs.
func annotations(in Input) []Difference {
	by := map[string][]Workload{}
	var auto []Workload
	for _, w := range in.Workloads {
		for _, k := range w.Annotations {
			by[k] = append(by[k], w)
		}
		if w.OptsIn && w.WithReloaderArgs && slices.ContainsFunc(w.Annotations, isAuto) {
			auto = append(auto, w)
		}
	}
	var out []Difference
	for _, k := range reloaderKeys {
		ws := by[k]
		if len(ws) == 0 {
			continue
		}
		key := k
		if to, ok := in.Options.AnnotationKeys[k]; ok {
			key = to + " (Reloader's " + k + ")"
		}
		text := "read the same: " + key
		if k == optin.PausePeriod {
			text = "read otherwise: " + key + ": watcher holds the restart until the period ends (Event RestartWaiting) instead of pausing the Deployment; works for every kind"
		}
		out = append(out, listed(Difference{Topic: TopicAnnotations, Text: text}, ws))
	}
	if len(auto) > 0 {
		out = append(out, listed(Difference{Topic: TopicAnnotations, Restarts: true,
			Text: "auto: Reloader restarts on any change of a ConfigMap or Secret the workload uses; watcher only when a key it reads changes (an envFrom or a whole volume reads every key)"}, auto))
	}
	return out
}

func isAuto(k string) bool {
	return k == optin.ReloaderAuto || k == optin.ConfigMapAuto || k == optin.SecretAuto || k == optin.SecretProviderClassAuto
}

// guards: watcher's restart guards, which Reloader does not have.
func guards(in Input) []Difference {
	o := in.Options
	var on []string
	if !o.RestartBudget.Off() {
		on = append(on, "at most "+o.RestartBudget.String()+" restarts of a workload (--restart-budget=0)")
	}
	if !o.FlapThreshold.Off() {
		on = append(on, "holds the restarts of an object changing more than "+o.FlapThreshold.String()+" (--flap-threshold=0)")
	}
	if o.MaxConcurrentRollouts > 0 {
		on = append(on, fmt.Sprintf("at most %d rollouts at once (--max-concurrent-rollouts=0)", o.MaxConcurrentRollouts))
	}
	if o.Coalesce > 0 {
		on = append(on, "restarts once a burst of changes has been quiet "+o.Coalesce.String()+" (--coalesce=0)")
	}
	if len(on) == 0 {
		return nil
	}
	return []Difference{{Topic: TopicGuards, Restarts: true,
		Text: "watcher guards restarts, Reloader does not: " + strings.Join(on, "; ")}}
}

// listed names at most MaxListed of ws in d.
func listed(d Difference, ws []Workload) Difference {
	d.Count = len(ws)
	for i, w := range ws {
		if i == MaxListed {
			break
		}
		d.Workloads = append(d.Workloads, w.Kind+" "+w.Namespace+"/"+w.Name)
	}
	return d
}

// namespaces returns the namespaces of ws, each once, sorted, with the
// number of workloads of each.
func namespaces(ws []Workload) []string {
	n := map[string]int{}
	for _, w := range ws {
		n[w.Namespace]++
	}
	out := make([]string, 0, len(n))
	for _, ns := range slices.Sorted(maps.Keys(n)) {
		out = append(out, fmt.Sprintf("%s (%d)", ns, n[ns]))
	}
	return out
}

// plural says n things.
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
