package options_test

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/options"
)

// TestReloaderFlags: Reloader's arguments start watcher with Reloader's
// meaning mapped onto watcher's settings; a value watcher cannot read
// stops it with a message naming the flag.
func TestReloaderFlags(t *testing.T) {
	env := func(kv ...string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1], true
				}
			}
			return "", false
		}
	}
	tests := []struct {
		name  string
		args  []string
		env   func(string) (string, bool)
		check func(*options.Options) string
		err   string
	}{
		{name: "no Reloader argument: watcher's defaults", env: env(),
			check: want("discovery", "all", func(o *options.Options) string { return o.Discovery })},
		{name: "Reloader's chart defaults: annotated, as Reloader", args: []string{"--log-level=info"}, env: env("RELOADER_NAMESPACE", "reloader"),
			check: want("discovery", "annotated", func(o *options.Options) string { return o.Discovery })},
		{name: "auto-reload-all", args: []string{"--auto-reload-all=true", "--log-format="}, env: env(),
			check: want("discovery", "all", func(o *options.Options) string { return o.Discovery })},
		{name: "a watcher setting wins", args: []string{"--auto-reload-all", "--discovery=annotated"}, env: env(),
			check: want("discovery", "annotated", func(o *options.Options) string { return o.Discovery })},
		{name: "reload-strategy env-vars", args: []string{"--reload-strategy=env-vars"}, env: env(),
			check: want("strategy", "env", func(o *options.Options) string { return o.RestartStrategy })},
		{name: "reload-strategy annotations", args: []string{"--reload-strategy=annotations"}, env: env(),
			check: want("strategy", "annotation", func(o *options.Options) string { return o.RestartStrategy })},
		{name: "namespaces-to-ignore", args: []string{"--namespaces-to-ignore=team-a,team-b"}, env: env(),
			check: want("ignored", "true true", func(o *options.Options) string {
				return has(o.IgnoreConfigMapNamespaces, "team-b") + " " + has(o.IgnoreSecretNamespaces, "team-a")
			})},
		{name: "resources-to-ignore secrets", args: []string{"--resources-to-ignore=secrets"}, env: env(),
			check: want("ignored secrets", "*", func(o *options.Options) string { return strings.Join(o.IgnoreSecretNamespaces, ",") })},
		{name: "resource-label-selector, Reloader's forms", args: []string{"--resource-label-selector=reloader:enabled,team:*"}, env: env(),
			check: want("config selector", "reloader=enabled,team", func(o *options.Options) string { return o.ConfigSelector })},
		{name: "enable-pprof", args: []string{"--enable-pprof"}, env: env(),
			check: want("pprof", ":6060", func(o *options.Options) string { return o.PprofAddr })},
		{name: "log levels", args: []string{"--log-level=trace"}, env: env(),
			check: want("level", "debug", func(o *options.Options) string { return o.LogLevel })},
		{name: "noted flags", args: []string{"--enable-ha=true", "--is-Argo-Rollouts=true", "--sync-after-restart=true"}, env: env(),
			check: want("notes on --enable-ha and --is-Argo-Rollouts", "true", func(o *options.Options) string {
				n := strings.Join(o.Notes, "\n")
				return fmt.Sprint(strings.Contains(n, "--enable-ha") && strings.Contains(n, "--is-Argo-Rollouts"))
			})},
		{name: "jobs ignored", args: []string{"--ignored-workload-types=jobs"}, env: env(),
			check: want("ignored kinds", "Job", func(o *options.Options) string { return strings.Join(o.IgnoreWorkloadKinds, ",") })},
		{name: "jobs ignored, but watcher's own setting wins", args: []string{"--ignored-workload-types=jobs", "--ignore-workload-kinds=DaemonSet"}, env: env(),
			check: want("ignored kinds", "DaemonSet", func(o *options.Options) string { return strings.Join(o.IgnoreWorkloadKinds, ",") })},
		{name: "Reloader's own keys are accepted", args: []string{"--configmap-annotation", "configmap.reloader.stakater.com/reload"}, env: env(),
			check: want("discovery", "annotated", func(o *options.Options) string { return o.Discovery })},
		{name: "another key is read in place of Reloader's", args: []string{"--configmap-annotation", "example.com/reload", "--auto-annotation=example.com/auto"}, env: env(),
			check: want("keys", "configmap.reloader.stakater.com/reload=example.com/reload,reloader.stakater.com/auto=example.com/auto", func(o *options.Options) string {
				return keysText(o.AnnotationKeys)
			})},
		{name: "watcher's --annotation-keys wins", args: []string{"--auto-annotation=example.com/auto", "--annotation-keys=reloader.stakater.com/auto=team.example/auto"}, env: env(),
			check: want("keys", "reloader.stakater.com/auto=team.example/auto", func(o *options.Options) string { return keysText(o.AnnotationKeys) })},
		{name: "a key flag wins over ANNOTATION_KEYS for its key", args: []string{"--auto-annotation=example.com/auto", "--secret-annotation", "secret.reloader.stakater.com/reload"},
			env:   env("ANNOTATION_KEYS", "reloader.stakater.com/auto=team.example/auto,configmap.reloader.stakater.com/reload=team.example/cm,secret.reloader.stakater.com/reload=team.example/s"),
			check: want("keys", "configmap.reloader.stakater.com/reload=team.example/cm,reloader.stakater.com/auto=example.com/auto", func(o *options.Options) string { return keysText(o.AnnotationKeys) })},
		{name: "a key that is no annotation key", args: []string{"--secret-annotation", "not a key!"}, env: env(), err: "annotation-keys"},
		{name: "one key for two meanings", args: []string{"--secret-annotation", "example.com/reload", "--configmap-annotation", "example.com/reload"}, env: env(), err: "read for both"},
		{name: "a key another meaning keeps", args: []string{"--secret-annotation", "configmap.reloader.stakater.com/reload"}, env: env(), err: "read for both"},
		{name: "webhook-url: posts instead of restarting", args: []string{"--webhook-url", "https://hooks.example/x"}, env: env(),
			check: want("webhook", "true true webhook https://hooks.example/x", func(o *options.Options) string {
				return fmt.Sprintf("%t %t %s %s", o.DryRun, o.Alert.OnReload, o.Alert.Sink, o.Alert.WebhookURL)
			})},
		{name: "webhook-url: watcher's settings win", args: []string{"--webhook-url", "https://hooks.example/x", "--dry-run=false", "--alert-sink=slack"}, env: env(),
			check: want("webhook", "false true slack https://hooks.example/x", func(o *options.Options) string {
				return fmt.Sprintf("%t %t %s %s", o.DryRun, o.Alert.OnReload, o.Alert.Sink, o.Alert.WebhookURL)
			})},
		{name: "namespace-selector, Reloader's forms", args: []string{"--namespace-selector=team:a,env:*", "--namespace-selector", "tier=web"}, env: env("RELOADER_NAMESPACE", "reloader"),
			check: want("namespace selector", "team=a,env,tier=web", func(o *options.Options) string { return o.NamespaceSelector })},
		{name: "namespace-selector invalid", args: []string{"--namespace-selector=team in (a"}, env: env(), err: "--namespace-selector"},
		{name: "csi", args: []string{"--enable-csi-integration"}, env: env(),
			check: want("csi", "true", func(o *options.Options) string { return fmt.Sprint(o.CSI) })},
		{name: "csi off", args: []string{"--enable-csi-integration=false"}, env: env(),
			check: want("csi", "false", func(o *options.Options) string { return fmt.Sprint(o.CSI) })},
		{name: "cronjobs ignored", args: []string{"--ignored-workload-types=jobs,cronjobs"}, env: env(),
			check: want("ignored kinds", "Job,CronJob", func(o *options.Options) string { return strings.Join(o.IgnoreWorkloadKinds, ",") })},
		{name: "IGNORE_WORKLOAD_KINDS takes Job", env: env("IGNORE_WORKLOAD_KINDS", "Job"),
			check: want("ignored kinds", "Job", func(o *options.Options) string { return strings.Join(o.IgnoreWorkloadKinds, ",") })},
		{name: "not a kind", args: []string{"--ignore-workload-kinds=Pod"}, env: env(), err: "no workload kind"},
		{name: "bad resource", args: []string{"--resources-to-ignore=pods"}, env: env(), err: "configmaps or secrets"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := options.Parse(tt.args, tt.env, io.Discard)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Parse(%v) = %v, want an error with %q", tt.args, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%v): %v", tt.args, err)
			}
			if msg := tt.check(o); msg != "" {
				t.Error(msg)
			}
		})
	}
}

func want(what, value string, get func(*options.Options) string) func(*options.Options) string {
	return func(o *options.Options) string {
		if got := get(o); got != value {
			return what + ": got " + got + ", want " + value
		}
		return ""
	}
}

func has(list []string, item string) string {
	for _, x := range list {
		if x == item {
			return "true"
		}
	}
	return "false"
}

func keysText(k optin.Keys) string {
	var out []string
	for _, own := range slices.Sorted(maps.Keys(k)) {
		out = append(out, own+"="+k[own])
	}
	return strings.Join(out, ",")
}
