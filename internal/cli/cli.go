// Package cli holds watcher's commands for people, watcher graph, watcher
// explain, watcher key derive, watcher migrate, watcher history, watcher
// rollback and watcher stale, also run as a kubectl plugin (kubectl
// watcher ...) when the binary is named kubectl-watcher. migrate
// (migrate.go) plans the switch from a running Stakater Reloader with
// package migrate; history, rollback and stale (history.go, rollback.go,
// stale.go) read and restore the revisions of workloads that pin their
// config (package pin), and list those that run stale config. They read any
// cluster through a kubeconfig and kubectl's connection flags (client-go's
// clientcmd), need no running watcher, and report with package explain: the
// controller's own resolver (resolve.Standard), rules (plan.NewChain) and
// decision.
//
// They never print a Secret value: ConfigMaps and Secrets are hashed with
// the key of their namespace (hash.NamespaceKey) as they are read, and only
// key names and the first explain.HashPrefix digits of those keyed hashes
// are shown. history and stale also read snapshots (and the sources of
// pinned workloads) whole, and reduce each value at once to a SHA-256 kept
// in memory only, to tell which keys differ: only key names are shown.
// The one exception is asked for by name: watcher key derive
// prints (or writes to a Secret) the key of one namespace, for explain.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/watcher-dev/watcher/internal/explain"
	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/packed"
	"github.com/watcher-dev/watcher/internal/policy"
	"github.com/watcher-dev/watcher/internal/settings"
)

// PluginName is the binary's name as a kubectl plugin.
const PluginName = "kubectl-watcher"

// The commands; key is followed by derive.
const (
	cmdGraph     = "graph"
	cmdExplain   = "explain"
	cmdKey       = "key"
	cmdKeyDerive = "key derive"
	cmdMigrate   = "migrate"
	cmdHistory   = "history"
	cmdRollback  = "rollback"
	cmdStale     = "stale"
)

// IsCommand tells whether arg names one of the commands.
func IsCommand(arg string) bool {
	switch arg {
	case cmdGraph, cmdExplain, cmdKey, cmdMigrate, cmdHistory, cmdRollback, cmdStale:
		return true
	}
	return false
}

// IsPlugin tells whether the binary was started as a kubectl plugin, from
// its argv[0].
func IsPlugin(argv0 string) bool {
	return strings.TrimSuffix(filepath.Base(argv0), ".exe") == PluginName
}

// Main runs the command named by args[1] (argv without its first element
// removed) and returns the process's exit code: 0 done, 1 failed, 2 bad
// usage.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	prog := "watcher"
	if IsPlugin(args[0]) {
		prog = "kubectl watcher"
	}
	name, rest := "", []string(nil)
	switch {
	case len(args) < 2 || !IsCommand(args[1]):
	case args[1] != cmdKey:
		name, rest = args[1], args[2:]
	case len(args) > 2 && args[2] == "derive":
		name, rest = cmdKeyDerive, args[3:]
	}
	if name == "" {
		fmt.Fprintf(stderr, "Usage:\n  %[1]s graph [-n NAMESPACE | -A] [-o text|json|dot] [flags]\n  %[1]s explain KIND/NAME [-n NAMESPACE] [-o text|json] [flags]\n  %[1]s key derive -n NAMESPACE [--write] [flags]\n  %[1]s migrate [-n NAMESPACE] [--deployment NAME] [--compare [--since 1h]] [-o text|json] [flags]\n"+
			"  %[1]s history KIND/NAME [-n NAMESPACE] [-o text|json] [flags]\n  %[1]s rollback KIND/NAME --to-revision N [-n NAMESPACE] [--dry-run] [flags]\n  %[1]s stale [-n NAMESPACE | -A] [-o text|json] [flags]\n\nRun '%[1]s COMMAND --help' for the flags.\n", prog)
		if len(args) >= 2 && (args[1] == "-h" || args[1] == "--help" || args[1] == "help") {
			return 0
		}
		return 2
	}
	switch name {
	case cmdMigrate:
		return runMigrate(ctx, prog, rest, stdout, stderr)
	case cmdHistory, cmdRollback:
		return runRevisionCommand(ctx, prog, name, rest, stdout, stderr)
	}
	c := newCommand(prog, name, stderr)
	err := c.flags.Parse(rest)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err == nil {
		err = c.validate()
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s %s: %v\nRun '%s %s --help' for the flags.\n", prog, c.name, err, prog, c.name)
		return 2
	}
	if err := c.run(ctx, stdout); err != nil {
		fmt.Fprintf(stderr, "%s %s: %v\n", prog, c.name, err)
		return 1
	}
	return 0
}

// command is one run of graph or explain.
type command struct {
	prog, name string
	// stderr takes remarks: what could not be read.
	stderr    io.Writer
	flags     *pflag.FlagSet
	rules     *clientcmd.ClientConfigLoadingRules
	overrides clientcmd.ConfigOverrides
	// opts holds the installation's settings, bound to the controller's own
	// flags.
	opts             *options.Options
	output           string
	allNamespaces    bool
	watcherNamespace string
	// watcherName is the installation's name (its Lease): its settings are
	// published in the ConfigMap settings.ConfigMapName(watcherName).
	watcherName string
	// installation holds the installation's settings, once read (see
	// installationSettings): published ones with the flags given on top.
	installation settings.Settings
	// explainKey is --explain-key, explainKeySecret --explain-key-secret;
	// write is key derive's --write.
	explainKey, explainKeySecret string
	write                        bool
}

// explainKeyEnv holds the key explain uses when --explain-key is not given:
// better than the flag, which other users of the machine can see.
const explainKeyEnv = "WATCHER_EXPLAIN_KEY"

// installationFlags are the controller's flags that change what the
// commands report, with the same names, meanings and defaults: those of
// the settings (settings.Settings.BindFlags), each overriding, given on
// the command line, the published setting.
func installationFlags(fs *pflag.FlagSet, s *settings.Settings) {
	all := pflag.NewFlagSet("watcher", pflag.ContinueOnError)
	s.BindFlags(all)
	all.VisitAll(func(f *pflag.Flag) {
		flag := *f
		flag.Usage = "overrides the installation's --" + f.Name + ": " + flag.Usage
		fs.AddFlag(&flag)
	})
}

func newCommand(prog, name string, stderr io.Writer) *command {
	c := &command{prog: prog, name: name, stderr: stderr, opts: options.Defaults(), rules: clientcmd.NewDefaultClientConfigLoadingRules()}
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.rules.ExplicitPath, "kubeconfig", "", "path to a kubeconfig; none: $KUBECONFIG, then ~/.kube/config")
	clientcmd.BindOverrideFlags(&c.overrides, fs, clientcmd.RecommendedConfigOverrideFlags(""))
	formats := "text or json"
	switch name {
	case cmdGraph:
		formats = "text, json or dot"
		fs.BoolVarP(&c.allNamespaces, "all-namespaces", "A", false, "every namespace")
	case cmdStale:
		fs.BoolVarP(&c.allNamespaces, "all-namespaces", "A", false, "every namespace")
	case cmdExplain:
		fs.StringVar(&c.explainKey, "explain-key", "", "the key of the namespace explained, as watcher key derive prints it (better: $"+explainKeyEnv+")")
	case cmdKeyDerive:
		fs.BoolVar(&c.write, "write", false, "write the key into the Secret --explain-key-secret of the namespace instead of printing it")
	}
	if name != cmdKeyDerive {
		fs.StringVarP(&c.output, "output", "o", "text", "output format: "+formats)
	}
	if name != cmdGraph {
		fs.StringVar(&c.explainKeySecret, "explain-key-secret", "watcher-explain-key", "Secret of the namespace explained holding its key (watcher key derive --write)")
	}
	fs.StringVar(&c.watcherNamespace, "watcher-namespace", "watcher", "namespace of the watcher installation, holding its hash key Secret and its published settings")
	fs.StringVar(&c.watcherName, "watcher-name", "watcher", "name of the watcher installation (its --lease-name): its settings are read from the ConfigMap NAME-settings of --watcher-namespace")
	installationFlags(fs, &c.opts.Settings)
	fs.Usage = func() { c.usage(stderr) }
	c.flags = fs
	return c
}

func (c *command) usage(w io.Writer) {
	switch c.name {
	case cmdGraph:
		fmt.Fprintf(w, "Usage: %s graph [-n NAMESPACE | -A] [-o text|json|dot] [flags]\n\n"+
			"Which workloads use which ConfigMaps and Secrets, through which keys and paths,\n"+
			"as watcher sees them. Reads metadata only: no Secret is read.\n\n", c.prog)
	case cmdKeyDerive:
		fmt.Fprintf(w, "Usage: %s key derive -n NAMESPACE [--write] [flags]\n\n"+
			"Prints the key of one namespace, derived from the installation's hash key (which\n"+
			"this needs to read): with it, watcher explain compares the hashes of that\n"+
			"namespace, and of no other. --write puts it in the Secret --explain-key-secret\n"+
			"of the namespace instead, where explain finds it.\n\n", c.prog)
	case cmdStale:
		fmt.Fprintf(w, "Usage: %s stale [-n NAMESPACE | -A] [-o text|json] [flags]\n\n"+
			"Every workload whose pods run configuration older than the current one, since\n"+
			"when and why (rolled back, not watched, opted out, held, failed, OnDelete, not\n"+
			"restarted yet): those explain would restart, and those whose template pins a\n"+
			"snapshot that is not their source's content now. Records are compared with the\n"+
			"key of each namespace (the Secret --explain-key-secret, else the installation's\n"+
			"hash key Secret); without one, only pinned workloads are checked. Prints key\n"+
			"names, never a value.\n\n", c.prog)
	default:
		fmt.Fprintf(w, "Usage: %s explain KIND/NAME [-n NAMESPACE] [-o text|json] [flags]\n\n"+
			"What watcher does with a workload (Deployment, StatefulSet, DaemonSet, CronJob,\n"+
			"Job, Rollout) or a ConfigMap or Secret: what it uses or who uses it, which rule\n"+
			"drops or ignores what, whether a restart is pending and why, the last restarts.\n"+
			"Prints key names and the first %d digits of keyed hashes, never a value.\n"+
			"The key of the namespace comes from --explain-key or $%s, else the\n"+
			"Secret --explain-key-secret of the namespace, else the installation's hash key\n"+
			"Secret; without any, hashes are not compared.\n\n", c.prog, explain.HashPrefix, explainKeyEnv)
	}
	fmt.Fprintf(w, "The installation's settings are read from the ConfigMap that the running controller\n"+
		"publishes in its namespace (--watcher-name, --watcher-namespace); flags override them.\n\nFlags:\n%s", c.flags.FlagUsages())
}

func (c *command) validate() error {
	formats := []string{"text", "json"}
	switch {
	case c.name == cmdKeyDerive:
		if c.flags.NArg() > 0 {
			return fmt.Errorf("unexpected argument %q", c.flags.Arg(0))
		}
		if c.overrides.Context.Namespace == "" {
			return errors.New("want -n NAMESPACE, the namespace whose key to derive")
		}
		return c.opts.Validate()
	case c.name == cmdExplain:
		if c.explainKey == "" {
			c.explainKey = os.Getenv(explainKeyEnv)
		}
		if c.explainKey != "" {
			if _, err := hash.ParseNamespaceKey(c.explainKey); err != nil {
				return fmt.Errorf("the explain key given (--explain-key or $%s): %w", explainKeyEnv, err)
			}
		}
	}
	if c.name == cmdGraph || c.name == cmdStale {
		if c.name == cmdGraph {
			formats = append(formats, "dot")
		}
		if c.flags.NArg() > 0 {
			return fmt.Errorf("unexpected argument %q", c.flags.Arg(0))
		}
	} else if c.flags.NArg() != 1 {
		return errors.New("want one KIND/NAME, such as deployment/web or configmap/settings")
	}
	for _, f := range formats {
		if c.output == f {
			return c.opts.Validate()
		}
	}
	return fmt.Errorf("invalid --output %q: want %s", c.output, strings.Join(formats, ", "))
}

// installationSettings reads the settings the installation publishes and
// puts the flags given on the command line on top; when none can be read
// (no running watcher yet, no right to read them), it says so on warn and
// uses the flags and their defaults.
func (c *command) installationSettings(ctx context.Context, r *reader, warn io.Writer) settings.Settings {
	flags := c.opts.Settings
	name := settings.ConfigMapName(c.watcherName)
	s, err := settings.Read(ctx, r.c, c.watcherNamespace, name)
	if err != nil {
		fmt.Fprintf(warn, "%s: the installation's settings (ConfigMap %s/%s) cannot be read, so the defaults and the flags given are used: %v\n",
			c.prog, c.watcherNamespace, name, err)
		return flags
	}
	s.Override(flags, c.flags.Changed)
	return s
}

// settings returns what explain and graph decide with, built from the
// installation's settings as the controller builds its own.
func (c *command) settings(policies *policy.Index) (explain.Settings, error) {
	return explainSettings(c.installation, policies)
}

// explainSettings returns what explain and graph decide with under the
// installation's settings o, built as the controller builds its own.
func explainSettings(o settings.Settings, policies *policy.Index) (explain.Settings, error) {
	s := explain.Settings{
		Resolver:        o.Resolver(policies),
		Policies:        policies,
		Rules:           o.Rules(),
		RestartOnCreate: o.RestartOnCreate,
		ReloadOnDelete:  o.ReloadOnDelete,
		Namespaces:      o.Namespaces,
		IgnoredKinds:    o.IgnoreWorkloadKinds,
	}
	var err error
	s.WorkloadSelector, s.ConfigSelector, err = o.Selectors()
	if err != nil {
		return s, err
	}
	s.NamespaceSelector, err = o.NamespaceLabels()
	return s, err
}

func (c *command) run(ctx context.Context, out io.Writer) error {
	r, err := c.reader()
	if err != nil {
		return err
	}
	c.installation = c.installationSettings(ctx, r, c.stderr)
	r.rename(c.installation.AnnotationKeys)
	if c.name == cmdKeyDerive {
		return c.derive(ctx, r, out)
	}
	ns := r.namespace
	if (c.name == cmdGraph || c.name == cmdStale) && c.allNamespaces {
		ns = metav1.NamespaceAll
	}
	policies, err := r.policies(ctx, ns, c.stderr)
	if err != nil {
		return err
	}
	s, err := c.settings(policies)
	if err != nil {
		return err
	}
	s.Configs = &lister{ctx: ctx, c: r.c, lists: map[string][]*packed.Object{}}
	s.Pinning = r.pinning(ctx, c.stderr, c.prog)
	s.NamespaceLabels = (&namespaceLabels{ctx: ctx, c: r.c, warn: c.stderr, prog: c.prog, read: map[string]map[string]string{}}).get
	if c.name == cmdStale {
		return c.stale(ctx, r, s, out)
	}
	if c.name == cmdGraph {
		g, err := r.graph(ctx, s, c.allNamespaces)
		if err != nil {
			return err
		}
		switch c.output {
		case "json":
			return explain.WriteJSON(out, g)
		case "dot":
			return g.WriteDOT(out)
		}
		return g.WriteText(out)
	}
	err = r.hashKey(ctx, &s, keySources{given: c.explainKey, secret: c.explainKeySecret,
		watcherNamespace: c.watcherNamespace, hashKeySecret: c.installation.HashKeySecret})
	if err != nil {
		return err
	}
	report, err := r.explain(ctx, s, c.flags.Arg(0))
	if err != nil {
		return err
	}
	if c.output == "json" {
		return explain.WriteJSON(out, report)
	}
	return report.WriteText(out)
}
