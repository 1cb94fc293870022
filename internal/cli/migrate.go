package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/watcher-dev/watcher/deploy/reloader"
	"github.com/watcher-dev/watcher/internal/explain"
	"github.com/watcher-dev/watcher/internal/migrate"
	"github.com/watcher-dev/watcher/internal/packed"
)

// migration is one run of watcher migrate.
type migration struct {
	prog      string
	stderr    io.Writer
	flags     *pflag.FlagSet
	rules     *clientcmd.ClientConfigLoadingRules
	overrides clientcmd.ConfigOverrides
	// deployment is --deployment; output -o; compare --compare, since
	// --since.
	deployment, output string
	compare            bool
	since              time.Duration
	install            migrate.Install
}

func newMigration(prog string, stderr io.Writer) *migration {
	m := &migration{prog: prog, stderr: stderr, rules: clientcmd.NewDefaultClientConfigLoadingRules()}
	m.install.Command = prog + " " + cmdMigrate
	m.install.Manifest = reloader.RBAC
	fs := pflag.NewFlagSet(cmdMigrate, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&m.rules.ExplicitPath, "kubeconfig", "", "path to a kubeconfig; none: $KUBECONFIG, then ~/.kube/config")
	clientcmd.BindOverrideFlags(&m.overrides, fs, clientcmd.RecommendedConfigOverrideFlags(""))
	fs.StringVar(&m.deployment, "deployment", "", "name of Reloader's Deployment; none: every Deployment running an image of "+migrate.Image)
	fs.StringVarP(&m.output, "output", "o", "text", "output format: text or json; rbac: the RBAC of the image swap, to pipe to kubectl apply -f -")
	fs.BoolVar(&m.compare, "compare", false, "compare what watcher in --dry-run would have restarted (WouldRestart Events) with what Reloader did, per workload")
	fs.DurationVar(&m.since, "since", time.Hour, "with --compare, how far back (Events are kept an hour by default)")
	fs.StringVar(&m.install.Release, "release", "watcher", "helm release name of watcher")
	fs.StringVar(&m.install.Namespace, "release-namespace", "watcher", "namespace of the helm release")
	fs.StringVar(&m.install.Chart, "chart", "deploy/helm/watcher", "watcher's chart")
	fs.StringVar(&m.install.Image, "image", "ghcr.io/watcher-dev/watcher", "watcher's image, for the image swap (the one you pushed)")
	fs.StringVar(&m.install.RBAC, "rbac", "deploy/reloader", "folder of the rights watcher needs in Reloader's Deployment (rbac.yaml, rbac-namespaced.yaml) and of their admission policy (admissionpolicy.yaml), for the image swap")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s migrate [-n NAMESPACE] [--deployment NAME] [-o text|json] [flags]\n"+
			"       %s migrate --compare [-n NAMESPACE] [--since 1h] [-o text|json] [flags]\n\n"+
			"Reads a running Stakater Reloader's Deployment (by --deployment, or by its image;\n"+
			"in -n NAMESPACE, else in every namespace), reads its arguments and environment as\n"+
			"watcher would, and prints what to apply (watcher's chart with Reloader's arguments,\n"+
			"first in dry-run beside Reloader; or the image swap in Reloader's Deployment with\n"+
			"the rights to add) and every difference that changes a restart on this cluster,\n"+
			"counting the workloads (it lists them, and the metadata of ConfigMaps and Secrets).\n\n"+
			"--compare, once watcher has run in dry-run beside Reloader, prints per workload\n"+
			"whether watcher would have restarted it (its WouldRestart Events) and whether\n"+
			"Reloader did (its Reloaded Events, its marks on the pod template): agree, only\n"+
			"watcher or only Reloader. No Secret value is read.\n\nFlags:\n%s", m.prog, m.prog, fs.FlagUsages())
	}
	m.flags = fs
	return m
}

// runMigrate runs watcher migrate with args; it returns the exit code.
func runMigrate(ctx context.Context, prog string, args []string, stdout, stderr io.Writer) int {
	m := newMigration(prog, stderr)
	err := m.flags.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	switch {
	case err != nil:
	case m.flags.NArg() > 0:
		err = fmt.Errorf("unexpected argument %q", m.flags.Arg(0))
	case m.output != "text" && m.output != "json" && (m.output != "rbac" || m.compare):
		err = fmt.Errorf("invalid --output %q: want text or json (or rbac, without --compare)", m.output)
	case m.since <= 0:
		err = errors.New("--since must be positive")
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s migrate: %v\nRun '%s migrate --help' for the flags.\n", prog, err, prog)
		return 2
	}
	if m.compare {
		err = m.runCompare(ctx, stdout)
	} else {
		err = m.runPlan(ctx, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s migrate: %v\n", prog, err)
		return 1
	}
	return 0
}

// namespace is -n, "" (every namespace) when not given.
func (m *migration) namespace() string { return m.overrides.Context.Namespace }

// runPlan reads the Reloaders and the cluster's workloads and prints the
// plan of each Reloader.
func (m *migration) runPlan(ctx context.Context, out io.Writer) error {
	r, err := connect(m.rules, &m.overrides, cmdMigrate)
	if err != nil {
		return err
	}
	deps, err := r.deployments(ctx, m.namespace())
	if err != nil {
		return err
	}
	found := migrate.Find(deps, m.deployment)
	if len(found) == 0 {
		where := "in any namespace"
		if m.namespace() != "" {
			where = "in namespace " + m.namespace()
		}
		if m.deployment != "" {
			return fmt.Errorf("no Deployment %s %s", m.deployment, where)
		}
		return fmt.Errorf("no Deployment running an image of %s %s: name it with --deployment (and -n)", migrate.Image, where)
	}
	objs, unread := r.workloads(ctx, "")
	unreadWhy := ""
	if unread != nil {
		unreadWhy = unread.Error()
		objs = nil
	}
	cl := &census{r: r, ctx: ctx, lister: &lister{ctx: ctx, c: r.c, lists: map[string][]*packed.Object{}},
		labels: &namespaceLabels{ctx: ctx, c: r.c, warn: m.stderr, prog: m.prog, read: map[string]map[string]string{}}}
	plans := make([]migrate.Plan, 0, len(found))
	for _, rel := range found {
		o, err := rel.Options()
		if err != nil {
			return fmt.Errorf("watcher cannot read the arguments and environment of Reloader %s/%s (it would not start with them): %w", rel.Namespace, rel.Name, err)
		}
		in := migrate.Input{Reloader: rel, Options: o, Unread: unreadWhy, Install: m.install,
			Neighbours: r.neighbours(ctx, rel.Namespace)}
		if unreadWhy == "" {
			if in.Workloads, err = cl.workloads(o, objs); err != nil {
				return err
			}
		}
		plans = append(plans, migrate.Calculate(in))
	}
	switch m.output {
	case "json":
		return explain.WriteJSON(out, plans)
	case "rbac":
		// The manifest goes to kubectl; the warning, to the terminal.
		for i, p := range plans {
			if i > 0 {
				fmt.Fprintln(out, "---")
			}
			fmt.Fprint(out, p.ImageSwap.Manifest)
			for _, l := range p.ImageSwap.Warning {
				fmt.Fprintf(m.stderr, "%s migrate: %s\n", m.prog, l)
			}
		}
		return nil
	}
	for i, p := range plans {
		if i > 0 {
			fmt.Fprintln(out, "\n---")
		}
		if err := p.WriteText(out); err != nil {
			return err
		}
	}
	return nil
}

// runCompare compares watcher's WouldRestart Events with what Reloader did.
func (m *migration) runCompare(ctx context.Context, out io.Writer) error {
	r, err := connect(m.rules, &m.overrides, cmdMigrate)
	if err != nil {
		return err
	}
	ns := m.namespace()
	events, err := r.restartEvents(ctx, ns)
	if err != nil {
		return err
	}
	objs, err := r.workloads(ctx, ns)
	if err != nil {
		return err
	}
	ws := make([]migrate.Workload, 0, len(objs))
	for _, obj := range objs {
		kind := obj.GetObjectKind().GroupVersionKind().Kind
		ws = append(ws, migrate.Workload{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), Marks: migrate.MarksOf(obj)})
	}
	c := migrate.Compare(migrate.CompareInput{Since: time.Now().Add(-m.since), Events: events, Workloads: ws})
	if m.output == "json" {
		return explain.WriteJSON(out, c)
	}
	return c.WriteText(out)
}
